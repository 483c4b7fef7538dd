package protect

import (
	"context"
	"net/http"
)

// Middleware returns a handler that verifies every request before next
// sees it, on every path of next, 404s included. A refused request gets the
// decision's problem+json response (or Config.OnRefused's); an allowed one
// carries the RateLimit fields, and next reads the decision with
// FromContext. Requests for which Config.Skip reports true go to next
// untouched.
//
// With Config.CountStatus set, it counts failures instead of requests: it
// checks the client before next (Check) and refuses one with no failures
// left, which counts the attempt, so a client that keeps trying is banned;
// otherwise next runs, and the request counts only if its status satisfies
// CountStatus, counted when next writes the status, before the header goes
// out. A failure is counted as Penalize counts it, resolving the request
// again. The repository's docs/failures.md tells every case. Next sees a
// writer that keeps http.Flusher, http.Hijacker and io.ReaderFrom when the
// server's writer has them, and Unwrap for http.ResponseController.
//
// With Config.Challenge, a Challenged request gets the proof-of-work page
// (403; OnRefused is not called), and a POST to Challenge.Path, its
// answer, is handled first: see the repository's docs/challenge.md.
func (p *Protector) Middleware(next http.Handler) http.Handler {
	h := p.middleware(next)
	if p.chal != nil {
		h = p.challengeMiddleware(h)
	}
	return h
}

// middleware is Middleware without the challenge's answer path.
func (p *Protector) middleware(next http.Handler) http.Handler {
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
	if d.Status == Challenged && p.chal != nil {
		p.servePage(w, d, r.URL.RequestURI())
		return
	}
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
		if d.Status == Challenged {
			p.passed(r.Context(), r, &d)
		}
		counted := false
		// A client with no failure left (Check: Limited, Exhausted or
		// Challenged without a pass) is refused, and the attempt
		// counted, so that the count goes on to BanLimit. The context
		// outlives a client that hangs up: every attempt counts.
		if d.Status == Limited || d.Status == Exhausted || d.Status == Challenged {
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
