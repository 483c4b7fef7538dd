package protect

import (
	"testing"
)

func TestBreaker(t *testing.T) {
	clk := newFakeClock()
	b := new(Circuit)
	b.init(clk.Now)
	for i := range breakerThreshold {
		if !b.allow() {
			t.Fatalf("allow() on call %d while closed = false, want true", i)
		}
		if opened := b.failure(); opened != (i == breakerThreshold-1) {
			t.Fatalf("failure() %d = %v, want %v", i+1, opened, !opened)
		}
	}
	clk.Advance(breakerCooldown - 1)
	if b.allow() {
		t.Fatal("allow() before the cooldown = true, want false: the circuit is open")
	}
	clk.Advance(1)
	if !b.allow() || b.allow() {
		t.Fatal("allow(), allow() after the cooldown = not exactly one true, want true, false: one probe goes through")
	}
	b.failure() // the probe failed: open for another cooldown
	clk.Advance(breakerCooldown - 1)
	if b.allow() {
		t.Fatal("allow() after a failed probe = true, want false: the circuit reopens")
	}
	clk.Advance(1)
	if !b.allow() || !b.success() || !b.allow() || b.open() {
		t.Fatal("allow(), success(), allow(), open() after the cooldown = not true, true, true, false: a successful probe closes the circuit")
	}
}
