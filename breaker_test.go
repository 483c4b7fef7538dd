package protect

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

func TestBreaker(t *testing.T) {
	var b breaker
	now := time.Unix(1000, 0)
	for i := range breakerThreshold {
		if !b.allow(now) {
			t.Fatalf("call %d refused while closed", i)
		}
		if opened := b.failure(now); opened != (i == breakerThreshold-1) {
			t.Fatalf("failure %d: opened %v", i+1, opened)
		}
	}
	if b.allow(now.Add(breakerCooldown - 1)) {
		t.Fatal("open circuit let a call through before the cooldown")
	}
	later := now.Add(breakerCooldown)
	if !b.allow(later) || b.allow(later) {
		t.Fatal("after the cooldown exactly one probe goes through")
	}
	b.failure(later) // the probe failed: open for another cooldown
	if b.allow(later.Add(breakerCooldown - 1)) {
		t.Fatal("a failed probe must reopen the circuit")
	}
	again := later.Add(breakerCooldown)
	if !b.allow(again) || !b.success() || !b.allow(again) || b.open() {
		t.Fatal("a successful probe closes the circuit")
	}
}

// A probe whose caller gives up neither closes nor reopens the circuit,
// but must not keep the next probe out forever.
func TestBreakerAbandonedProbe(t *testing.T) {
	addr := "127.0.0.1:1" // nothing listens: every call fails at once
	in := newInstance(t, addr, "protect:", Config{OnStoreError: FailOpen, StoreTimeout: 100 * time.Millisecond}, RedisOptions{RangeRefresh: -1})
	a := netip.MustParseAddr("192.0.2.1")
	for range breakerThreshold {
		in.p.VerifyAddr(t.Context(), a)
	}
	if !in.p.brk.open() {
		t.Fatal("circuit not open after failures")
	}
	in.clock.Advance(breakerCooldown)
	gone, cancel := context.WithCancel(t.Context())
	cancel() // the probe's caller has already gone
	in.p.VerifyAddr(gone, a)
	in.clock.Advance(breakerCooldown)
	if !in.p.brk.allow(in.clock.Now()) {
		t.Fatal("an abandoned probe kept the circuit shut for good")
	}
}
