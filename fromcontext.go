package protect

import (
	"context"
	"net/http"
)

// decisionContext carries Middleware's decision to the handler. It is a
// context.Context whose Value answers for decisionKey and delegates the
// rest, so that the context package still finds the parent's
// cancellation through it (no goroutine per derived context). Holding the
// Decision inline makes it one allocation; context.WithValue would take a
// second one to box the Decision into an interface.
type decisionContext struct {
	context.Context
	d Decision
}

type decisionKey struct{}

func (c *decisionContext) Value(key any) any {
	if _, ok := key.(decisionKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// withDecision returns r with d in its context, for FromContext. It
// allocates the decisionContext and the shallow copy of r that
// Request.WithContext makes, and nothing else.
func withDecision(r *http.Request, d *Decision) *http.Request {
	return r.WithContext(&decisionContext{Context: r.Context(), d: *d})
}

// FromContext returns the decision Middleware made for the request whose
// context ctx is (or derives from), so that a handler can read it:
//
//	d, ok := protect.FromContext(r.Context())
//	if ok { log.Printf("%s has %d requests left", d.Key, d.Remaining) }
//
// With Config.CountStatus the decision is the check made before the
// handler ran, not counting the handler's own response. Under nested
// Middlewares it is the innermost one's. ok is false when no Middleware
// decided: outside one, or for a request Config.Skip passed. The zero
// Decision is returned then.
func FromContext(ctx context.Context) (Decision, bool) {
	if c, ok := ctx.Value(decisionKey{}).(*decisionContext); ok {
		return c.d, true
	}
	return Decision{}, false
}
