package protect

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A deadlineCtx is done within one slot after its deadline, reports the
// caller's cancellation at once, and shares its channel with every
// deadline of its slot.
func TestDeadlineContext(t *testing.T) {
	var w deadlines
	start := time.Now()
	d := start.Add(20 * time.Millisecond)
	ctx := w.context(context.Background(), d)
	if got, ok := ctx.Deadline(); !ok || !got.Equal(d) {
		t.Fatalf("Deadline() = %v, %v; want %v, true", got, ok, d)
	}
	if same := w.context(context.Background(), d.Add(time.Nanosecond)); same.Done() != ctx.Done() && d.UnixNano()%int64(deadlineSlot) != int64(deadlineSlot)-1 {
		t.Fatal("context(d + 1ns).Done() != context(d).Done(), want one channel for two deadlines a nanosecond apart in one slot")
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("Err() before the deadline = %v, want nil", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("Done() still open a second after a 20ms deadline, want closed")
	}
	if late := time.Since(d); late < 0 || late > deadlineSlot+50*time.Millisecond {
		t.Fatalf("Done() closed %v after the deadline, want within [0, %v + scheduling]", late, deadlineSlot)
	}
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err() after Done = %v, want DeadlineExceeded", err)
	}

	parent, cancel := context.WithCancel(context.Background())
	ctx = w.context(parent, time.Now().Add(time.Hour))
	cancel()
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err() after the caller cancelled = %v, want Canceled", err)
	}

	early, cancelEarly := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancelEarly()
	if got := w.context(early, time.Now().Add(time.Hour)); got != early {
		t.Fatal("context(parent with an earlier deadline) = a wrapper, want the parent as it is")
	}
}
