package blocklist

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/blocktest"
	"github.com/httpprotect/protect/internal/heaptest"
)

func TestBlockSetMatch(t *testing.T) {
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := NewSet([]Entry{
		{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Note: "SBL1"},
		{Prefix: netip.MustParsePrefix("198.51.100.7/32"), Note: "inside"},
		{Prefix: netip.MustParsePrefix("::ffff:203.0.113.0/120")},
		{Prefix: netip.MustParsePrefix("192.0.2.9/32"), Expires: end},
		{Prefix: netip.MustParsePrefix("192.0.2.9/32")},
		{Prefix: netip.MustParsePrefix("2001:db8::/32"), Note: "v6"},
		{Prefix: netip.MustParsePrefix("2001:db8:1::/48")},
		{Prefix: netip.MustParsePrefix("2001:db9::1/128")},
		{Prefix: netip.MustParsePrefix("2002::/16")},
		{Prefix: netip.MustParsePrefix("10.0.0.1/8")}, // host bits: masked
		{},
	})
	if got, want := s.Len(), 7; got != want {
		t.Errorf("Len() = %d, want %d", got, want)
	}
	tests := []struct {
		addr, entry, note string
		expires           time.Time
	}{
		{"198.51.100.7", "198.51.100.0/24", "SBL1", time.Time{}},
		{"198.51.100.255", "198.51.100.0/24", "SBL1", time.Time{}},
		{"::ffff:198.51.100.1", "198.51.100.0/24", "SBL1", time.Time{}},
		{"198.51.101.0", "", "", time.Time{}},
		{"198.51.99.255", "", "", time.Time{}},
		{"203.0.113.200", "203.0.113.0/24", "", time.Time{}},
		{"192.0.2.9", "192.0.2.9/32", "", time.Time{}}, // no end wins
		{"192.0.2.8", "", "", time.Time{}},
		{"10.255.255.255", "10.0.0.0/8", "", time.Time{}},
		{"2001:db8:1::5", "2001:db8::/32", "v6", time.Time{}},
		{"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db8::/32", "v6", time.Time{}},
		{"2001:db9::1", "2001:db9::1/128", "", time.Time{}},
		{"2001:db9::2", "", "", time.Time{}},
		{"2002:1::", "2002::/16", "", time.Time{}},
		{"::1", "", "", time.Time{}},
	}
	for _, tt := range tests {
		e, ok := s.Match(netip.MustParseAddr(tt.addr))
		if got := e.Prefix.String(); ok != (tt.entry != "") || ok && (got != tt.entry || e.Note != tt.note || !e.Expires.Equal(tt.expires)) {
			t.Errorf("Match(%s) = %v %q %v, %v; want %q %q %v", tt.addr, e.Prefix, e.Note, e.Expires, ok, tt.entry, tt.note, tt.expires)
		}
	}
	var empty *Set
	if empty.Contains(netip.MustParseAddr("192.0.2.1")) || empty.Len() != 0 {
		t.Errorf("nil Set holds something")
	}
}

// TestBlockSetIndexed checks the /16 table of a large set against a
// plain walk of its entries.
func TestBlockSetIndexed(t *testing.T) {
	entries, _ := benchEntries(20000, 5000)
	s := NewSet(entries)
	if s.v4idx == nil {
		t.Fatalf("a set of %d entries has no index", s.Len())
	}
	all := s.entries()
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		a := netip.AddrFrom4([4]byte{byte(r.UintN(256)), byte(r.UintN(256)), byte(r.UintN(256)), byte(r.UintN(256))})
		want := false
		for _, e := range all {
			if e.Prefix.Contains(a) {
				want = true
				break
			}
		}
		if got := s.Contains(a); got != want {
			t.Fatalf("Contains(%s) = %v, want %v", a, got, want)
		}
	}
	for _, e := range all[:2000] {
		if got, ok := s.Match(e.Prefix.Addr()); !ok || got.Prefix != e.Prefix {
			t.Fatalf("Match(%s) = %v, %v; want %v", e.Prefix.Addr(), got.Prefix, ok, e.Prefix)
		}
	}
}

// BenchmarkBlockSetLookup looks up addresses in a set of 250k addresses
// and 100k ranges, half of them listed, and reports the set's heap per
// entry.
func BenchmarkBlockSetLookup(b *testing.B) {
	entries, listed := benchEntries(250_000, 100_000)
	before := heaptest.Live()
	s := NewSet(entries)
	perEntry := float64(heaptest.Live()-before) / float64(len(entries))
	r := rand.New(rand.NewPCG(5, 6))
	probes := make([]netip.Addr, 4096)
	for i := range probes {
		if i%2 == 0 {
			probes[i] = listed[r.IntN(len(listed))]
		} else {
			probes[i] = netip.AddrFrom4([4]byte{byte(r.UintN(256)), byte(r.UintN(256)), byte(r.UintN(256)), byte(r.UintN(256))})
		}
	}
	b.ResetTimer()
	hits := 0
	for i := 0; b.Loop(); i++ {
		if s.Contains(probes[i&4095]) {
			hits++
		}
	}
	runtime.KeepAlive(entries)
	b.ReportMetric(perEntry, "B/entry")
	if hits == 0 {
		b.Fatal("no probe was listed")
	}
}

// TestBlockSetOccupancyEdges checks the /24 bits of a large set at the
// ends of IPv4 and across a range wider than a /24.
func TestBlockSetOccupancyEdges(t *testing.T) {
	var entries []Entry
	for i := range v4OccupancyMin {
		entries = append(entries, Entry{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 9), byte(i >> 1), byte(1 + i&1)}), 32)})
	}
	for _, p := range []string{"0.0.0.0/8", "255.255.255.255/32", "198.18.0.0/15"} {
		entries = append(entries, Entry{Prefix: netip.MustParsePrefix(p)})
	}
	s := NewSet(entries)
	if s.v4occ == nil {
		t.Fatalf("a set of %d entries has no occupancy bits", s.Len())
	}
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"0.0.0.0", true}, {"0.255.255.255", true}, {"1.0.0.0", false},
		{"255.255.255.255", true}, {"255.255.255.254", false}, {"255.255.254.255", false},
		{"198.17.255.255", false}, {"198.18.0.0", true}, {"198.19.128.7", true}, {"198.19.255.255", true}, {"198.20.0.0", false},
		{"10.0.5.1", true}, {"10.0.5.2", true}, {"10.0.5.3", false}, {"10.255.255.2", true}, {"11.0.0.1", false},
	} {
		if got := s.Contains(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Contains(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// TestBlockSetOccupancy compares a set that keeps its /24 bits with the
// same set searched without them, on random addresses and on the first,
// last and next address of every entry.
func TestBlockSetOccupancy(t *testing.T) {
	entries, _ := benchEntries(150_000, 20_000)
	s := NewSet(entries)
	if s.v4occ == nil {
		t.Fatalf("a set of %d entries has no occupancy bits", s.Len())
	}
	plain := *s
	plain.v4occ = nil
	check := func(x uint32) {
		t.Helper()
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], x)
		a := netip.AddrFrom4(b)
		if got, want := s.Contains(a), plain.Contains(a); got != want {
			t.Fatalf("Contains(%s) = %v, want %v (the search without the bits)", a, got, want)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 100_000 {
		check(r.Uint32())
	}
	for _, sp := range s.v4 {
		check(sp.lo)
		check(sp.hi)
		check(sp.lo - 1)
		check(sp.hi + 1)
	}
}

// benchEntries is blocktest.Entries as the entries of a Set.
func benchEntries(n, m int) ([]Entry, []netip.Addr) {
	ps, listed := blocktest.Entries(n, m)
	entries := make([]Entry, len(ps))
	for i, p := range ps {
		entries[i] = Entry{Prefix: p}
	}
	return entries, listed
}

// TestBlockSetEntries: Entries gives back every entry a set holds, with
// its note and end, as a prefix of the width it was listed at; an entry
// inside a wider one is not among them.
func TestBlockSetEntries(t *testing.T) {
	end := time.Unix(1_900_000_000, 0)
	in := []Entry{
		{Prefix: netip.MustParsePrefix("192.0.2.7/32"), Note: "one"},
		{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Expires: end},
		{Prefix: netip.MustParsePrefix("198.51.100.9/32")}, // inside the /24
		{Prefix: netip.MustParsePrefix("0.0.0.0/1")},
		{Prefix: netip.MustParsePrefix("2001:db8::/48"), Note: "v6"},
		{Prefix: netip.MustParsePrefix("2001:db8:ffff:1::/64")},
		{Prefix: netip.MustParsePrefix("2001:db8:ffff:2::1/128")},
		{Prefix: netip.MustParsePrefix("::ffff:203.0.113.0/120")},
		{Prefix: netip.MustParsePrefix("::/0")},          // a whole family: skipped
		{Prefix: netip.MustParsePrefix("::ffff:0:0/96")}, // 0.0.0.0/0 unmapped: skipped
	}
	got := fmt.Sprint(NewSet(in).Entries())
	want := fmt.Sprint([]Entry{
		{Prefix: netip.MustParsePrefix("0.0.0.0/1")},
		{Prefix: netip.MustParsePrefix("192.0.2.7/32"), Note: "one"},
		{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Expires: end},
		{Prefix: netip.MustParsePrefix("203.0.113.0/24")},
		{Prefix: netip.MustParsePrefix("2001:db8::/48"), Note: "v6"},
		{Prefix: netip.MustParsePrefix("2001:db8:ffff:1::/64")},
		{Prefix: netip.MustParsePrefix("2001:db8:ffff:2::1/128")},
	})
	if got != want {
		t.Fatalf("NewSet(%v).Entries() =\n%s\nwant\n%s", in, got, want)
	}
	if e := (*Set)(nil).Entries(); e != nil {
		t.Fatalf("(*Set)(nil).Entries() = %v, want nil", e)
	}
}
