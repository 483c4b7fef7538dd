package memstore

import (
	"net/netip"
	"testing"
	"time"
	"unsafe"
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

// memSpaceFor binds s to namespace ns with limits lim.
func memSpaceFor(t *testing.T, s *MemoryStore, ns string, lim *Limits) Space {
	t.Helper()
	sp, err := s.Space(Scope{Namespace: ns, Limits: *lim})
	if err != nil {
		t.Fatalf("Space(%q) = %v; the memory store never fails", ns, err)
	}
	return sp
}

func addrKeyFor(i int) Key {
	a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	return Key{Prefix: netip.PrefixFrom(a, 32)}
}

// mustTake counts one request of k and fails the test on an error.
func mustTake(t *testing.T, sp Space, k Key, a netip.Addr) Result {
	t.Helper()
	r, err := sp.Take(t.Context(), k, a, 1)
	if err != nil {
		t.Fatalf("Take(%s) = %v, want nil", k, err)
	}
	return r
}

func TestMemorySweep(t *testing.T) {
	s, clk := newTestMemoryStore(t, MemoryOptions{})
	ctx := t.Context()
	sp := memSpaceFor(t, s, "ns:", testLimits())
	for i := range 1000 {
		mustTake(t, sp, addrKeyFor(i), netip.Addr{})
	}
	if _, err := sp.AddBan(ctx, Ban{Key: addrKeyFor(5000), Source: SourceManual}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.AddBan(ctx, Ban{Key: addrKeyFor(5001), Source: SourceManual}, 0); err != nil {
		t.Fatal(err)
	}
	clk.Advance(5 * time.Second)
	mustTake(t, sp, addrKeyFor(1), netip.Addr{}) // keeps one counter alive
	clk.Advance(6 * time.Second)
	s.sweep()
	if n := s.Len(); n != 1 {
		t.Fatalf("Len() after the sweep = %d, want 1", n)
	}
	clk.Advance(time.Minute)
	s.sweep()
	bans, err := sp.Bans(ctx, BanFilter{})
	if err != nil || len(bans) != 1 || !bans[0].Permanent() || bans[0].Key != addrKeyFor(5001) {
		t.Fatalf("Bans() after expiry = %+v, %v; want the permanent ban on %s", bans, err, addrKeyFor(5001))
	}
}

// Under pressure counters are evicted; bans never are.
func TestMemoryBounded(t *testing.T) {
	s, _ := newTestMemoryStore(t, MemoryOptions{MaxKeys: 64, Shards: 4})
	ctx := t.Context()
	sp := memSpaceFor(t, s, "ns:", testLimits())
	for i := range 32 {
		if _, err := sp.AddBan(ctx, Ban{Key: addrKeyFor(100000 + i), Source: SourceManual}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10000 {
		mustTake(t, sp, addrKeyFor(i), netip.Addr{})
	}
	if n := s.Len(); n > 64 {
		t.Fatalf("Len() = %d, want at most the cap of 64", n)
	}
	bans, err := sp.Bans(ctx, BanFilter{})
	if err != nil || len(bans) != 32 {
		t.Fatalf("Bans() = %d bans, %v; want all 32 to survive", len(bans), err)
	}
	// The most recent key is always kept: eviction makes room before insert.
	if st, err := sp.Inspect(ctx, addrKeyFor(9999)); err != nil || st.Count != 1 {
		t.Fatalf("Inspect(newest key).Count = %d, %v; want 1", st.Count, err)
	}
}

// Shards are 128 bytes (a plan shard 64), so that a lock written by one
// core never shares a cache line with a neighbouring shard's.
func TestShardSize(t *testing.T) {
	if got := unsafe.Sizeof(shard[addrKey]{}); got != 128 {
		t.Fatalf("unsafe.Sizeof(shard[addrKey]{}) = %d, want 128", got)
	}
	if got := unsafe.Sizeof(shard[nameKey]{}); got != 128 {
		t.Fatalf("unsafe.Sizeof(shard[nameKey]{}) = %d, want 128", got)
	}
	if got := unsafe.Sizeof(planShard{}); got != 64 {
		t.Fatalf("unsafe.Sizeof(planShard{}) = %d, want 64", got)
	}
}

func TestMemoryNamespaces(t *testing.T) {
	s, _ := newTestMemoryStore(t, MemoryOptions{})
	ctx := t.Context()
	a := memSpaceFor(t, s, "a:", testLimits())
	b := memSpaceFor(t, s, "b:", testLimits())
	k := addrKeyFor(1)
	for range 3 {
		mustTake(t, a, k, netip.Addr{})
	}
	if r := mustTake(t, b, k, netip.Addr{}); r.Count != 1 {
		t.Fatalf("namespace b: Take.Count = %d, want 1", r.Count)
	}
	// Spaces of one namespace share their data.
	if r := mustTake(t, memSpaceFor(t, s, "a:", testLimits()), k, netip.Addr{}); r.Count != 4 {
		t.Fatalf("namespace a, second space: Take.Count = %d, want 4", r.Count)
	}
	rng := Key{Prefix: netip.MustParsePrefix("10.0.0.0/8")}
	if _, err := a.AddBan(ctx, Ban{Key: rng, Range: true, Source: SourceManual}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if r := mustTake(t, b, k, netip.MustParseAddr("10.0.0.1")); r.Banned() {
		t.Fatalf("namespace b: Take(%s) = banned, want allowed: a range ban in namespace a stays there", k)
	}
	if r := mustTake(t, a, k, netip.MustParseAddr("10.0.0.1")); !r.Banned() || !r.Ban.Range || r.Ban.Key != rng {
		t.Fatalf("namespace a: Take(%s) = %+v, want banned by the range %s", k, r, rng)
	}
	if bans, err := b.Bans(ctx, BanFilter{}); err != nil || len(bans) != 0 {
		t.Fatalf("namespace b: Bans() = %+v, %v; want none", bans, err)
	}
}

// A hot key's Take allocates nothing.
func TestMemoryTakeDoesNotAllocate(t *testing.T) {
	s, _ := newTestMemoryStore(t, MemoryOptions{})
	lim := testLimits()
	lim.BanLimit = -1
	sp := memSpaceFor(t, s, "ns:", lim)
	ctx := t.Context()
	k := addrKeyFor(7)
	a := k.Prefix.Addr()
	if n := testing.AllocsPerRun(1000, func() { sp.Take(ctx, k, a, 1) }); n != 0 {
		t.Fatalf("Space.Take on a hot key allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { sp.Take(ctx, k, a, 0) }); n != 0 {
		t.Fatalf("Space.Take(n=0) on a hot key allocates %v times, want 0", n)
	}
}

// memSpace.addrKey computes wordsOf and hashAddr in one step: the keys and
// the hash it gives are theirs, for IPv4, IPv6 and every prefix length.
func TestAddrKeyHash(t *testing.T) {
	s, _ := newTestMemoryStore(t, MemoryOptions{})
	sp := memSpaceFor(t, s, "ns:", testLimits()).(*memSpace)
	for _, c := range []string{"203.0.113.7/32", "10.0.0.0/8", "0.0.0.0/0", "2001:db8:1:2::/64", "2001:db8::1/128", "::/0", "ffff:ffff::/32"} {
		p := netip.MustParsePrefix(c)
		mk, bk, h := sp.addrKey(p)
		w := wordsOf(p)
		want := addrKey{hi: w.hi, lo: w.lo, meta: sp.ns.id<<8 | w.bits}
		wantB := addrKey{hi: w.hi, lo: w.lo, meta: sp.bns.id<<8 | w.bits}
		if mk != want || bk != wantB || h != s.hashAddr(want) {
			t.Errorf("addrKey(%s) = %+v %+v %#x, want %+v %+v %#x", p, mk, bk, h, want, wantB, s.hashAddr(want))
		}
	}
}

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
