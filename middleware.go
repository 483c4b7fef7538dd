package protect

import (
	"context"
	"net/http"
)

// Middleware returns a handler that verifies every request before next
// sees it, on every path of next, 404s included. A refused request gets
// the decision's problem+json response; an allowed one carries the
// RateLimit fields.
//
// With Config.CountStatus set, it counts failures instead of requests:
//
//   - Before next, it checks the client without counting (Check). An
//     unknown, banned or unavailable client is answered as Verify would
//     answer it; a safe one passes, never counted.
//   - A client with no failures left (its count has reached MaxRequests,
//     or its plan, under Config.Plan or ConsumerFunc, would refuse one
//     more) is refused with 429 without reaching next, and the refused
//     attempt counts: a client that keeps trying passes BanLimit and is
//     banned, as a stream of requests would be. MaxRequests is the
//     number of failures allowed without a pause of TTL, as it is the
//     number of requests without CountStatus.
//   - Otherwise next runs, and the request counts only if its status
//     satisfies CountStatus: 200 when next never writes one; 1xx
//     informational responses are not the status; a hijacked connection
//     has none and never counts. The failure is counted when next writes
//     the status, before the header goes out, and the response carries
//     the RateLimit fields after that count (and Retry-After when the
//     count limited or banned the client). A response that does not
//     count carries the Check's fields.
//
// A failure is counted as Penalize counts it: the request is resolved
// again, so KeyFunc and ConsumerFunc must answer for it after next as they
// did before. Between the Check and the count, concurrent requests of one
// client are not stopped: at most the requests already in flight pass.
// The counts themselves stay exact. Next sees a writer that keeps http.Flusher,
// http.Hijacker and io.ReaderFrom when the server's writer has them, and
// http.ResponseController reaches the server's writer through Unwrap.
//
// A handler behind it may also call Penalize; that adds to what the
// middleware counts, so a handler that answers 401 and penalizes the same
// failure counts it twice.
//
// Requests for which Config.Skip reports true go to next untouched. A
// refusal is written by Config.OnRefused when it is set. next reads the
// decision with FromContext.
func (p *Protector) Middleware(next http.Handler) http.Handler {
	if counts := p.cfg.CountStatus; counts != nil {
		return p.failureMiddleware(next, counts)
	}
	skip := p.cfg.Skip
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if skip != nil && skip(r) {
			next.ServeHTTP(w, r)
			return
		}
		d, _ := p.Verify(r.Context(), r)
		if d.Refused() {
			p.refuse(w, r, &d)
			return
		}
		d.WriteHeaders(w.Header())
		next.ServeHTTP(w, withDecision(r, &d))
	})
}

// refuse writes a refusal: Config.OnRefused's, or the problem+json one.
func (p *Protector) refuse(w http.ResponseWriter, r *http.Request, d *Decision) {
	if p.cfg.OnRefused == nil {
		d.WriteResponse(w)
		return
	}
	d.WriteHeaders(w.Header())
	p.cfg.OnRefused(w, r, *d)
}

// failureMiddleware is Middleware with CountStatus: see there.
func (p *Protector) failureMiddleware(next http.Handler, counts func(int) bool) http.Handler {
	skip := p.cfg.Skip
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if skip != nil && skip(r) {
			next.ServeHTTP(w, r)
			return
		}
		d, _ := p.request(r.Context(), r, 0) // Check, counted below as the request's one decision
		counted := false
		// A client with no failure left (Check: Limited or Exhausted) is
		// refused, and the attempt counted, so that the count goes on to
		// BanLimit. The context outlives a client that hangs up: every
		// attempt counts.
		if d.Status == Limited || d.Status == Exhausted {
			d, _ = p.penalize(context.WithoutCancel(r.Context()), r, 1)
			counted = true
		}
		p.decided(&d)
		if d.Refused() {
			p.refuse(w, r, &d)
			return
		}
		d.WriteHeaders(w.Header())
		// The outcome re-resolves the request after next, so it keeps r;
		// next gets the copy that carries the decision.
		rd := withDecision(r, &d)
		if counted || d.Status != Allowed {
			// Safe, a dry run of a refusal, or an attempt counted above
			// (its counter had just expired): a live protector counts
			// nothing more.
			next.ServeHTTP(w, rd)
			return
		}
		sw, st := newStatusWriter(w, outcome{p: p, counts: counts, r: r})
		defer func() {
			if v := recover(); v != nil {
				// net/http answers a panicking handler's request with 500
				// (or drops the connection): count it as that, or a probe
				// that crashes a handler escapes the trap.
				st.fail()
				panic(v)
			}
		}()
		next.ServeHTTP(sw, rd)
		st.done()
	})
}
