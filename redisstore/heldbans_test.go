package redisstore

import (
	"net/netip"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// Bans this instance knows refuse whatever the store's health: a range
// ban and a cached key ban still refuse once Redis is dead and the circuit
// open, under every failure policy, long after the cache's age, while
// other clients follow the policy.
func TestBansHoldWhileTheStoreIsDown(t *testing.T) {
	for _, policy := range []protect.FailurePolicy{protect.FailLocal, protect.FailOpen, protect.FailClosed} {
		t.Run(policy.String(), func(t *testing.T) {
			m := miniredis.RunT(t)
			in := newInstance(t, m.Addr(), "protect:", protect.Config{OnStoreError: policy}, Options{RangeRefresh: -1})
			ctx := t.Context()
			if _, err := in.p.Ban(ctx, "198.51.100.0/24", protect.BanOptions{For: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if _, err := in.p.Ban(ctx, "203.0.113.5", protect.BanOptions{For: time.Hour}); err != nil {
				t.Fatal(err)
			}
			inRange, banned, other := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("203.0.113.5"), netip.MustParseAddr("192.0.2.1")
			for _, a := range []netip.Addr{inRange, banned} {
				if d, _ := in.p.VerifyAddr(ctx, a); d.Status != protect.Banned {
					t.Fatalf("%v before the outage: %v", a, d.Status)
				}
			}
			m.Close()
			for i := range 2 * breakerThreshold {
				d, _ := in.p.VerifyAddr(ctx, other)
				if d.Err == nil {
					t.Fatalf("request %d to a dead Redis: no error", i)
				}
				want := map[protect.FailurePolicy]protect.Status{protect.FailLocal: protect.Allowed, protect.FailOpen: protect.Allowed, protect.FailClosed: protect.Unavailable}[policy]
				if d.Status != want {
					t.Fatalf("a client with no ban, Redis dead: %v; want %v", d.Status, want)
				}
			}
			// Past BanCacheTTL, short of the cooldown's end: the circuit is
			// open, and the key ban's cached answer is older than the
			// cache keeps it when Redis answers.
			in.clock.Advance(breakerCooldown - 100*time.Millisecond)
			for _, a := range []netip.Addr{inRange, banned} {
				d, _ := in.p.VerifyAddr(ctx, a)
				if d.Status != protect.Banned || !d.Refused() || d.StatusCode() != 403 || d.RetryAfter <= 0 {
					t.Fatalf("%v with Redis dead and the circuit open (%v): %v %d; want banned 403", a, d.Err, d.Status, d.StatusCode())
				}
				if !in.p.Stats().CircuitOpen {
					t.Fatal("the circuit should be open")
				}
			}
		})
	}
}

// A ban the FailLocal store writes while Redis is down reaches Redis once
// it answers again, so every instance enforces it.
func TestBansWrittenLocallyReachTheStore(t *testing.T) {
	m := miniredis.RunT(t)
	cfg := protect.Config{MaxRequests: 1, BanLimit: 2}
	a := newInstance(t, m.Addr(), "protect:", cfg, Options{RangeRefresh: -1})
	ctx := t.Context()
	client := netip.MustParseAddr("192.0.2.9")
	a.p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.200")) // connected, ranges loaded
	m.Close()
	var d protect.Decision
	for range 3 {
		d, _ = a.p.VerifyAddr(ctx, client)
	}
	if d.Status != protect.Banned || d.Err == nil {
		t.Fatalf("third request on the local store: %v %v; want banned", d.Status, d.Err)
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	a.clock.Advance(breakerCooldown)
	if d, _ := a.p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.201")); d.Err != nil {
		t.Fatalf("after Redis came back: %v", d.Err)
	}
	b := newInstance(t, m.Addr(), "protect:", cfg, Options{RangeRefresh: -1})
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Check counts nothing: polling does not change the count.
		d, _ := b.p.Check(ctx, request(client.String()+":1"))
		if d.Status == protect.Banned {
			if d.Ban == nil || d.Ban.Source != protect.SourceAuto || d.RetryAfter <= 0 || d.RetryAfter > time.Hour {
				t.Fatalf("the ban in Redis: %+v, %v left", d.Ban, d.RetryAfter)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ban written on the local store never reached Redis: %v", d.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// While the circuit is open, a banned client is answered from the bans
// held here without calling the store: its request must not be taken as
// the breaker's probe, whose success would close the circuit on a Redis
// that is still dead.
func TestHeldBanDoesNotCloseTheCircuit(t *testing.T) {
	m := miniredis.RunT(t)
	in := newInstance(t, m.Addr(), "protect:", protect.Config{OnStoreError: protect.FailOpen}, Options{RangeRefresh: -1})
	ctx := t.Context()
	if _, err := in.p.Ban(ctx, "198.51.100.0/24", protect.BanOptions{For: time.Hour}); err != nil {
		t.Fatal(err)
	}
	inRange := netip.MustParseAddr("198.51.100.7")
	in.p.VerifyAddr(ctx, inRange) // ranges loaded
	m.Close()
	for range breakerThreshold {
		in.p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.1"))
	}
	in.clock.Advance(breakerCooldown) // the next call would be the probe
	if d, _ := in.p.VerifyAddr(ctx, inRange); d.Status != protect.Banned {
		t.Fatalf("banned range with Redis dead: %v", d.Status)
	}
	if !in.p.Stats().CircuitOpen {
		t.Fatal("a ban answered from memory closed the circuit of a dead Redis")
	}
}

// A ban replayed from the local store never replaces a ban the shared
// store already holds on its key: an operator's permanent ban written
// while this instance was cut off stays permanent (AddBan replaces, so a
// blind replay would cut it down to the local ban's hour).
func TestReplayedBanKeepsTheStoresBan(t *testing.T) {
	m := miniredis.RunT(t)
	cfg := protect.Config{MaxRequests: 1, BanLimit: 2}
	a := newInstance(t, m.Addr(), "protect:", cfg, Options{RangeRefresh: -1})
	ctx := t.Context()
	client := netip.MustParseAddr("192.0.2.9")
	a.p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.200"))
	m.Close()
	for range 3 {
		a.p.VerifyAddr(ctx, client)
	}
	if n := a.p.Stats().PendingBans; n != 1 {
		t.Fatalf("Stats().PendingBans = %d, want 1", n)
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	b := newInstance(t, m.Addr(), "protect:", cfg, Options{RangeRefresh: -1})
	if _, err := b.p.Ban(ctx, client.String(), protect.BanOptions{Permanent: true, Reason: "operator", By: "ops"}); err != nil {
		t.Fatal(err)
	}
	a.clock.Advance(breakerCooldown)
	if d, _ := a.p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.201")); d.Err != nil {
		t.Fatalf("after Redis came back: %v", d.Err)
	}
	a.p.Close() // waits for the replay, which runs in the background
	if n := a.p.Stats().PendingBans; n != 0 {
		t.Fatalf("Stats().PendingBans after the replay = %d, want 0", n)
	}
	st, err := admin.New(b.p).InspectKey(ctx, protect.Key{Prefix: netip.PrefixFrom(client, 32)})
	if err != nil {
		t.Fatal(err)
	}
	if st.Ban == nil || !st.Ban.Permanent() || st.Ban.Reason != "operator" {
		t.Fatalf("ban in the store after the replay: %+v; want the operator's permanent ban", st.Ban)
	}
}
