package memstore

import (
	"net/netip"
	"testing"
	"time"
)

// Eviction cannot reset a client's counter (issue 12.13): with MaxKeys
// reached, a flood of fresh keys evicts its own kind, never the counter
// of a busy client, which would come back at 1. And a counter past
// MaxRequests is never evicted while one within it is left, however far
// from the sample that one sits.
func TestMemoryEvictionKeepsBusyCounters(t *testing.T) {
	lim := testLimits()
	lim.MaxRequests = 100
	for _, c := range []struct {
		name         string
		busy, others int   // busy clients, and other counters filling the store
		busyCount    int64 // requests each busy client has made
		flood        int   // fresh keys the attacker sends
	}{
		{"one busy client, flood", 1, 0, 150, 10_000},
		{"busy clients, flood", 8, 0, 60, 10_000},
		{"all past MaxRequests but one", 255, 1, 150, 1},
	} {
		// Twenty stores, twenty hash seeds: the one counter within
		// MaxRequests lies outside the first 16 looked at in most.
		for range 20 {
			t.Run(c.name, func(t *testing.T) {
				s, clk := newTestMemoryStore(t, MemoryOptions{MaxKeys: 256, Shards: 1})
				sp := memSpaceFor(t, s, "evict:", lim)
				ctx := t.Context()
				for b := range c.busy {
					k := addrKeyFor(b)
					if _, err := sp.Take(ctx, k, k.Prefix.Addr(), c.busyCount); err != nil {
						t.Fatal(err)
					}
				}
				for o := range c.others {
					mustTake(t, sp, addrKeyFor(1000+o), netip.Addr{})
				}
				clk.Advance(time.Second) // nothing expires: TTL is 10s
				for i := range c.flood {
					mustTake(t, sp, addrKeyFor(100_000+i), netip.Addr{})
				}
				if s.Len() > 256 {
					t.Fatalf("Len() = %d, want at most MaxKeys 256", s.Len())
				}
				for b := range c.busy {
					k := addrKeyFor(b)
					if r := mustTake(t, sp, k, k.Prefix.Addr()); r.Count != c.busyCount+1 {
						t.Fatalf("Take(%s), a busy client after the flood: Count = %d, want %d (its counter was evicted)", k, r.Count, c.busyCount+1)
					}
				}
			})
		}
	}
}
