package memstore

import (
	"testing"
	"time"
)

// The coarse clock is the one part of the memory store tested on real
// time: it exists to read the real clock less often.
func TestCoarseClock(t *testing.T) {
	epoch := time.Now()
	c := newCoarseClock(epoch)
	c.idle = 20
	t.Cleanup(c.close)

	last := int64(0)
	for range 50 {
		before := int64(time.Since(epoch))
		got := c.now()
		after := int64(time.Since(epoch))
		// It may lag by a tick plus scheduling delay; it never runs ahead.
		if got > after || got < before-int64(50*time.Millisecond) || got < last {
			t.Fatalf("now() = %v, want within [%v - 50ms, %v] and not before %v", time.Duration(got), time.Duration(before), time.Duration(after), time.Duration(last))
		}
		last = got
		time.Sleep(200 * time.Microsecond)
	}
	if !c.running() {
		t.Fatal("c.running() while the clock is read = false, want true")
	}

	// Unread for c.idle ticks, the refresher stops; the next read starts it
	// with a fresh time.
	deadline := time.Now().Add(2 * time.Second)
	for c.running() {
		if time.Now().After(deadline) {
			t.Fatal("c.running() after 2s without a read = true, want false")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	before := int64(time.Since(epoch))
	if got := c.now(); got < before || !c.running() {
		t.Fatalf("now(), the first read after idle = %v, want at least %v and the refresher running again", time.Duration(got), time.Duration(before))
	}

	// Closed, it reads the real clock every time and runs nothing.
	c.close()
	if c.running() {
		t.Fatal("c.running() after close() = true, want false")
	}
	time.Sleep(5 * time.Millisecond)
	before = int64(time.Since(epoch))
	if got := c.now(); got < before || c.running() {
		t.Fatalf("now() after close = %v, want at least %v with no refresher", time.Duration(got), time.Duration(before))
	}
}
