package protect

import (
	"net/netip"
	"testing"
	"time"
)

func testLimits() *Limits {
	return &Limits{TTL: 10 * time.Second, BanLimit: 1000, BanDuration: time.Hour, BanFactor: 2, MaxBanDuration: 24 * time.Hour, OffenseWindow: 24 * time.Hour}
}

func newTestMemoryStore(t *testing.T, opt MemoryOptions) (*MemoryStore, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	opt.Clock = clk.Now
	if opt.SweepInterval == 0 {
		opt.SweepInterval = -1 // tests sweep by hand
	}
	s := NewMemoryStore(opt)
	t.Cleanup(func() { s.Close() })
	return s, clk
}

func addrKeyFor(i int) Key {
	a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	return Key{Prefix: netip.PrefixFrom(a, 32)}
}

func TestMemorySweep(t *testing.T) {
	s, clk := newTestMemoryStore(t, MemoryOptions{})
	ctx, lim := t.Context(), testLimits()
	for i := range 1000 {
		s.Take(ctx, "ns:", addrKeyFor(i), netip.Addr{}, lim)
	}
	s.AddBan(ctx, "ns:", Ban{Key: addrKeyFor(5000), Source: SourceManual}, time.Minute)
	s.AddBan(ctx, "ns:", Ban{Key: addrKeyFor(5001), Source: SourceManual}, 0)
	clk.Advance(5 * time.Second)
	s.Take(ctx, "ns:", addrKeyFor(1), netip.Addr{}, lim) // keeps one counter alive
	clk.Advance(6 * time.Second)
	s.sweep()
	if n := s.Len(); n != 1 {
		t.Fatalf("%d counters after the sweep, want 1", n)
	}
	clk.Advance(time.Minute)
	s.sweep()
	bans, _ := s.Bans(ctx, "ns:")
	if len(bans) != 1 || !bans[0].Permanent() {
		t.Fatalf("bans after expiry: %+v", bans)
	}
}

// Under pressure counters are evicted; bans never are.
func TestMemoryBounded(t *testing.T) {
	s, _ := newTestMemoryStore(t, MemoryOptions{MaxKeys: 64, Shards: 4})
	ctx, lim := t.Context(), testLimits()
	for i := range 32 {
		if _, err := s.AddBan(ctx, "ns:", Ban{Key: addrKeyFor(100000 + i), Source: SourceManual}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10000 {
		s.Take(ctx, "ns:", addrKeyFor(i), netip.Addr{}, lim)
	}
	if n := s.Len(); n > 64 {
		t.Fatalf("%d counters, cap 64", n)
	}
	bans, _ := s.Bans(ctx, "ns:")
	if len(bans) != 32 {
		t.Fatalf("%d bans survived, want all 32", len(bans))
	}
	// The most recent key is always kept: eviction makes room before insert.
	if st, _ := s.Inspect(ctx, "ns:", addrKeyFor(9999), lim); st.Count != 1 {
		t.Fatalf("newest key count %d", st.Count)
	}
}

func TestMemoryNamespaces(t *testing.T) {
	s, _ := newTestMemoryStore(t, MemoryOptions{})
	ctx, lim := t.Context(), testLimits()
	k := addrKeyFor(1)
	for range 3 {
		s.Take(ctx, "a:", k, netip.Addr{}, lim)
	}
	r, _ := s.Take(ctx, "b:", k, netip.Addr{}, lim)
	if r.Count != 1 {
		t.Fatalf("namespace b sees count %d", r.Count)
	}
	s.AddBan(ctx, "a:", Ban{Key: Key{Prefix: netip.MustParsePrefix("10.0.0.0/8")}, Range: true}, time.Hour)
	if r, _ := s.Take(ctx, "b:", k, netip.MustParseAddr("10.0.0.1"), lim); r.Banned {
		t.Fatal("a range ban in namespace a reached namespace b")
	}
	if r, _ := s.Take(ctx, "a:", k, netip.MustParseAddr("10.0.0.1"), lim); !r.Banned || !r.Ban.Range {
		t.Fatalf("range ban: %+v", r)
	}
}

// TestMemoryTakeDoesNotAllocate guards the hot path.
func TestMemoryTakeDoesNotAllocate(t *testing.T) {
	s, _ := newTestMemoryStore(t, MemoryOptions{})
	ctx, lim := t.Context(), testLimits()
	lim.BanLimit = -1
	k := addrKeyFor(7)
	a := k.Prefix.Addr()
	if n := testing.AllocsPerRun(1000, func() { s.Take(ctx, "ns:", k, a, lim) }); n != 0 {
		t.Fatalf("Take allocates %v times", n)
	}
}
