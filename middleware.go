package protect

import "net/http"

// Middleware returns a handler that verifies every request before next
// sees it, on every path of next, 404s included. A refused request gets
// the decision's problem+json response; an allowed one carries the
// RateLimit fields.
func (p *Protector) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := p.Verify(r.Context(), r)
		if d.Refused() {
			d.WriteResponse(w)
			return
		}
		d.WriteHeaders(w.Header())
		next.ServeHTTP(w, r)
	})
}
