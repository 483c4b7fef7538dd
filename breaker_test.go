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
			t.Fatalf("call %d refused while closed", i)
		}
		if opened := b.failure(); opened != (i == breakerThreshold-1) {
			t.Fatalf("failure %d: opened %v", i+1, opened)
		}
	}
	clk.Advance(breakerCooldown - 1)
	if b.allow() {
		t.Fatal("open circuit let a call through before the cooldown")
	}
	clk.Advance(1)
	if !b.allow() || b.allow() {
		t.Fatal("after the cooldown exactly one probe goes through")
	}
	b.failure() // the probe failed: open for another cooldown
	clk.Advance(breakerCooldown - 1)
	if b.allow() {
		t.Fatal("a failed probe must reopen the circuit")
	}
	clk.Advance(1)
	if !b.allow() || !b.success() || !b.allow() || b.open() {
		t.Fatal("a successful probe closes the circuit")
	}
}
