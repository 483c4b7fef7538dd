package store

import (
	"testing"
)

func TestBreaker(t *testing.T) {
	clk := newFakeClock()
	b := new(Circuit)
	b.SetClock(clk.Now)
	for i := range breakerThreshold {
		if !b.Allow() {
			t.Fatalf("allow() on call %d while closed = false, want true", i)
		}
		if opened := b.Failure(); opened != (i == breakerThreshold-1) {
			t.Fatalf("failure() %d = %v, want %v", i+1, opened, !opened)
		}
	}
	clk.Advance(CircuitCooldown - 1)
	if b.Allow() {
		t.Fatal("allow() before the cooldown = true, want false: the circuit is open")
	}
	clk.Advance(1)
	if !b.Allow() || b.Allow() {
		t.Fatal("allow(), allow() after the cooldown = not exactly one true, want true, false: one probe goes through")
	}
	b.Failure() // the probe failed: open for another cooldown
	clk.Advance(CircuitCooldown - 1)
	if b.Allow() {
		t.Fatal("allow() after a failed probe = true, want false: the circuit reopens")
	}
	clk.Advance(1)
	if !b.Allow() || !b.Success() || !b.Allow() || b.Open() {
		t.Fatal("allow(), success(), allow(), open() after the cooldown = not true, true, true, false: a successful probe closes the circuit")
	}
}
