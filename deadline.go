package protect

import (
	"context"
	"time"
)

// A deadlineCtx carries StoreTimeout to a store that honours deadlines by
// itself, without the timer and the channel that context.WithTimeout
// makes on every call: half the garbage of a Redis check.
//
// It is used only for a store that says, through deadlineOnly, that a
// deadline is all it needs: the Redis store, whose go-redis client (with
// ContextTimeoutEnabled) turns the deadline into the socket's read and
// write deadlines — what bounds a call to a stalled server. Done and
// Err are the parent's, so a caller that gives up is still heard. What
// the deadline alone does not bound is a wait for a free connection in the
// client's pool: that wait is bounded by the client's PoolTimeout (a
// RedisURL client sets it to StoreTimeout).
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func withDeadline(parent context.Context, d time.Time) context.Context {
	if pd, ok := parent.Deadline(); ok && pd.Before(d) {
		return parent
	}
	return &deadlineCtx{Context: parent, deadline: d}
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Value(key any) any { return c.Context.Value(key) }
