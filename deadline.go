package protect

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A deadlineCtx carries StoreTimeout to the Redis store for a fraction of
// what context.WithTimeout costs per call (a context, a timer and a
// channel, all garbage once the call returns). Its Done channel
// is shared by every call whose deadline falls in the same slot of
// deadlineSlot (see deadlines), so a busy protector makes one timer and
// one channel per slot, not per call.
//
// Done closes when the deadline's slot ends: at most deadlineSlot after
// the deadline. That is what bounds the waits go-redis makes on Done (for
// a free pooled connection, a new connection, a retry's backoff); the
// deadline itself goes to the socket as its read and write deadline. Err
// reports the caller's cancellation at once, and DeadlineExceeded once
// Done is closed; Done does not close early when the caller gives up, but
// go-redis does not stop a read in flight for that either, and the
// deadline is short.
//
// It is used only for a store that says, through deadlineOnly, that it
// needs nothing else of a context: the Redis store.
type deadlineCtx struct {
	context.Context
	deadline time.Time
	slot     *deadlineSlotState
}

// deadlineSlot is the resolution of a deadlineCtx's Done channel.
const deadlineSlot = 5 * time.Millisecond

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Done() <-chan struct{} { return c.slot.done }

func (c *deadlineCtx) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	select {
	case <-c.slot.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c *deadlineCtx) Value(key any) any { return c.Context.Value(key) }

// deadlines hands out the Done channels of deadlineCtx: one per slot of
// deadlineSlot, closed by one timer when the slot ends. Deadlines of one
// protector only move forward (now plus a constant), so the current slot
// answers nearly every call with one atomic load.
type deadlines struct {
	cur atomic.Pointer[deadlineSlotState]
	mu  sync.Mutex // serialises making a slot
}

type deadlineSlotState struct {
	end  int64 // Unix nanoseconds: the slot covers (end-deadlineSlot, end]
	done chan struct{}
}

// context returns parent bounded by deadline d.
func (w *deadlines) context(parent context.Context, d time.Time) context.Context {
	if pd, ok := parent.Deadline(); ok && !pd.After(d) {
		return parent // the caller's own deadline comes first
	}
	return &deadlineCtx{Context: parent, deadline: d, slot: w.slot(d.UnixNano())}
}

func (w *deadlines) slot(n int64) *deadlineSlotState {
	if s := w.cur.Load(); s != nil && n <= s.end && n > s.end-int64(deadlineSlot) {
		return s
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.cur.Load(); s != nil && n <= s.end && n > s.end-int64(deadlineSlot) {
		return s
	}
	end := (n/int64(deadlineSlot) + 1) * int64(deadlineSlot)
	s := &deadlineSlotState{end: end, done: make(chan struct{})}
	time.AfterFunc(time.Until(time.Unix(0, end)), func() { close(s.done) })
	if cur := w.cur.Load(); cur == nil || cur.end < end {
		w.cur.Store(s)
	}
	return s
}
