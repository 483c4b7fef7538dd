package blocklist

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/httpprotect/protect/store"
)

// A Entry is one entry of a block list: a network, and what the
// list says of it. The zero Entry lists nothing: NewSet skips
// it.
type Entry struct {
	// Prefix is the listed network; a single address is a /32 or /128.
	// NewSet masks and unmaps it.
	Prefix netip.Prefix
	// Note is what the list says of the entry, if anything: a Spamhaus
	// SBL reference, a CrowdSec scenario. Empty when it says nothing.
	Note string
	// Expires is when the entry leaves the list, when the list says so (a
	// CrowdSec decision's end); zero when it does not.
	Expires time.Time
}

// A Set is an immutable set of block list entries, made once by
// NewSet and then read by any number of goroutines without a lock.
// A nil *Set is empty.
//
// Entries are kept as sorted, disjoint spans of integers: IPv4 as two
// 32-bit ends (8 bytes an entry), IPv6 as two 128-bit ends, with a table
// of where each /16 of IPv4 starts once the set is large, so that a
// lookup is a few compares whatever the size (measured in
// BenchmarkBlockSetLookup; docs/performance.md gives the figures). A
// large set also keeps one bit for each IPv4 /24 that an entry meets, so
// that most addresses it does not hold, which every request but a listed
// one brings, cost one load and no search. An entry inside a wider one
// of the same set is dropped when the set is made: the wider one answers
// for it.
type Set struct {
	v4    []span4
	v4idx []uint32              // v4idx[h] is the first i with v4[i].lo>>16 >= h; nil while v4 is small
	v4occ *[1 << 24 / 64]uint64 // bit x>>8 is set when an entry meets the /24 of x; nil below v4OccupancyMin
	v6    []span6
	notes []string // parallel to v4 then v6; nil when no entry has a note
	ends  []int64  // Expires as Unix nanoseconds, parallel as notes; nil when no entry has one
}

type span4 struct{ lo, hi uint32 }

type span6 struct{ lo, hi u128 }

type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

// v4IndexMin is the size from which a set indexes its IPv4 spans by /16:
// the table costs 256 KiB, which a small set would not repay.
const v4IndexMin = 4096

// v4OccupancyMin is the size from which a set keeps its /24 bits: one
// bit for every /24 of IPv4, a fixed cost that only a set this large
// repays (docs/blocklists.md gives the cost an entry).
const v4OccupancyMin = 1 << 17

// NewSet makes a set of entries. Invalid prefixes are skipped, and
// so is one that covers a whole address family (0.0.0.0/0, ::/0: a
// source that sends one, such as a CrowdSec Range decision, would refuse
// every client); every other one is masked and unmapped first
// (::ffff:192.0.2.0/120 is 192.0.2.0/24). Of two equal entries the first is kept, with the later
// of their ends (zero, no end, being the latest); an entry inside a wider
// one is dropped. entries is not kept.
func NewSet(entries []Entry) *Set { return newBlockSet(blockEntries(entries)) }

// An entrySource is what a set is made of: a caller's entries, or a
// parsed list, which keeps its prefixes alone (and notes only when it
// has some) so that a large list costs less while it is made.
type entrySource interface {
	len() int
	prefix(i int) netip.Prefix
	note(i int) string
	expires(i int) int64 // Unix nanoseconds; 0 for none
	hasNotes() bool
	hasEnds() bool
}

type blockEntries []Entry

func (b blockEntries) len() int                  { return len(b) }
func (b blockEntries) prefix(i int) netip.Prefix { return b[i].Prefix }
func (b blockEntries) note(i int) string         { return b[i].Note }
func (b blockEntries) expires(i int) int64 {
	if b[i].Expires.IsZero() {
		return 0
	}
	return b[i].Expires.UnixNano()
}
func (b blockEntries) hasNotes() bool {
	return slices.ContainsFunc(b, func(e Entry) bool { return e.Note != "" })
}
func (b blockEntries) hasEnds() bool {
	return slices.ContainsFunc(b, func(e Entry) bool { return !e.Expires.IsZero() })
}

func newBlockSet(src entrySource) *Set {
	type item struct {
		lo, hi u128
		order  int32
		v6     bool
	}
	items := make([]item, 0, src.len())
	for i := range src.len() {
		ep := src.prefix(i)
		if !ep.IsValid() {
			continue
		}
		p := store.UnmapPrefix(ep.Masked())
		if p.Addr().Zone() != "" {
			p = netip.PrefixFrom(p.Addr().WithZone(""), p.Bits())
		}
		if p.Bits() == 0 {
			continue // a whole family: see errEveryone
		}
		lo, hi := prefixRange(p)
		items = append(items, item{v6: p.Addr().Is6(), lo: lo, hi: hi, order: int32(i)})
	}
	slices.SortFunc(items, func(a, b item) int {
		switch {
		case a.v6 != b.v6:
			if a.v6 {
				return 1
			}
			return -1
		case a.lo != b.lo:
			if a.lo.less(b.lo) {
				return -1
			}
			return 1
		case a.hi != b.hi: // the wider first
			if b.hi.less(a.hi) {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.order, b.order)
	})
	s := &Set{}
	var notes []string
	var ends []int64
	hasNote, hasEnd := src.hasNotes(), src.hasEnds()
	kept := items[:0]
	for _, it := range items {
		if n := len(kept); n > 0 && kept[n-1].v6 == it.v6 && !kept[n-1].hi.less(it.lo) {
			// Inside the last kept entry (prefixes nest or are apart).
			if hasEnd && kept[n-1].lo == it.lo && kept[n-1].hi == it.hi && ends[n-1] != 0 {
				if e := src.expires(int(it.order)); e == 0 {
					ends[n-1] = 0
				} else {
					ends[n-1] = max(ends[n-1], e)
				}
			}
			continue
		}
		kept = append(kept, it)
		if hasNote {
			notes = append(notes, src.note(int(it.order)))
		}
		if hasEnd {
			ends = append(ends, src.expires(int(it.order)))
		}
	}
	if hasEnd {
		hasEnd = slices.ContainsFunc(ends, func(e int64) bool { return e != 0 })
	}
	if hasNote {
		hasNote = slices.ContainsFunc(notes, func(n string) bool { return n != "" })
	}
	n6 := 0
	for _, it := range kept {
		if it.v6 {
			n6++
		}
	}
	s.v4, s.v6 = make([]span4, 0, len(kept)-n6), make([]span6, 0, n6)
	for _, it := range kept {
		if it.v6 {
			s.v6 = append(s.v6, span6{it.lo, it.hi})
		} else {
			s.v4 = append(s.v4, span4{uint32(it.lo.lo), uint32(it.hi.lo)})
		}
	}
	s.v4 = slices.Clip(s.v4)
	s.v6 = slices.Clip(s.v6)
	if hasNote {
		s.notes = slices.Clip(notes)
	}
	if hasEnd {
		s.ends = slices.Clip(ends)
	}
	if len(s.v4) >= v4IndexMin {
		s.v4idx = make([]uint32, 1<<16+1)
		i := 0
		for h := range 1 << 16 {
			for i < len(s.v4) && s.v4[i].lo>>16 < uint32(h) {
				i++
			}
			s.v4idx[h] = uint32(i)
		}
		s.v4idx[1<<16] = uint32(len(s.v4))
	}
	if len(s.v4) >= v4OccupancyMin {
		s.v4occ = new([1 << 24 / 64]uint64)
		for _, sp := range s.v4 {
			for n := sp.lo >> 8; ; n++ {
				s.v4occ[n/64] |= 1 << (n % 64)
				if n == sp.hi>>8 {
					break
				}
			}
		}
	}
	return s
}

// prefixRange returns the first and last address of p as integers; an
// IPv4 prefix in the low 32 bits.
func prefixRange(p netip.Prefix) (lo, hi u128) {
	a := p.Addr()
	if a.Is4() {
		b := a.As4()
		v := uint64(binary.BigEndian.Uint32(b[:]))
		host := uint64(1)<<(32-p.Bits()) - 1
		return u128{lo: v}, u128{lo: v | host}
	}
	b := a.As16()
	lo = u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
	hi = lo
	switch n := 128 - p.Bits(); {
	case n >= 64:
		hi.lo = ^uint64(0)
		hi.hi |= 1<<(n-64) - 1
		if n == 128 {
			hi.hi = ^uint64(0)
		}
	default:
		hi.lo |= 1<<n - 1
	}
	return lo, hi
}

// Len returns the number of entries in force: those NewSet kept.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.v4) + len(s.v6)
}

// Contains reports whether a (unmapped first) is in the set.
func (s *Set) Contains(a netip.Addr) bool {
	_, ok := s.find(a.Unmap())
	return ok
}

// Match returns the entry that holds a (unmapped first), if any.
func (s *Set) Match(a netip.Addr) (Entry, bool) {
	i, ok := s.find(a.Unmap())
	if !ok {
		return Entry{}, false
	}
	return s.entry(i), true
}

// misses4 reports whether the set surely does not hold the IPv4 address
// x: no entry meets its /24; false means find4 must look. Lists.Find
// asks it first: for most addresses a large set does not hold it answers
// with one load.
func (s *Set) misses4(x uint32) bool {
	return s == nil || s.v4occ != nil && s.v4occ[x>>14]&(1<<(x>>8%64)) == 0
}

// find returns the index of the entry holding the unmapped address a.
func (s *Set) find(a netip.Addr) (int, bool) {
	if s == nil {
		return 0, false
	}
	if a.Is4() {
		b := a.As4()
		return s.find4(binary.BigEndian.Uint32(b[:]))
	}
	if !a.Is6() {
		return 0, false
	}
	b := a.As16()
	x := u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
	v := s.v6
	// The first span whose lo is above x; the one before it may hold x.
	i, j := 0, len(v)
	for i < j {
		h := int(uint(i+j) >> 1)
		if x.less(v[h].lo) {
			j = h
		} else {
			i = h + 1
		}
	}
	if i == 0 || v[i-1].hi.less(x) {
		return 0, false
	}
	return len(s.v4) + i - 1, true
}

func (s *Set) find4(x uint32) (int, bool) {
	if s.misses4(x) {
		return 0, false
	}
	v := s.v4
	i, j := 0, len(v)
	if s.v4idx != nil {
		i, j = int(s.v4idx[x>>16]), int(s.v4idx[x>>16+1])
	}
	// Within [i, j): the first span whose lo is above x. A span that
	// starts in an earlier /16 and reaches into this one is at i-1.
	for i < j {
		h := int(uint(i+j) >> 1)
		if x < v[h].lo {
			j = h
		} else {
			i = h + 1
		}
	}
	if i == 0 || v[i-1].hi < x {
		return 0, false
	}
	return i - 1, true
}

// entry rebuilds the i-th entry.
func (s *Set) entry(i int) Entry {
	var e Entry
	if i < len(s.v4) {
		sp := s.v4[i]
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], sp.lo)
		e.Prefix = netip.PrefixFrom(netip.AddrFrom4(b), 32-bits.Len32(sp.hi-sp.lo))
	} else {
		sp := s.v6[i-len(s.v4)]
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], sp.lo.hi)
		binary.BigEndian.PutUint64(b[8:], sp.lo.lo)
		host := bits.Len64(sp.hi.lo - sp.lo.lo)
		if d := sp.hi.hi - sp.lo.hi; d != 0 || sp.hi.lo-sp.lo.lo == ^uint64(0) {
			host = 64 + bits.Len64(d)
		}
		e.Prefix = netip.PrefixFrom(netip.AddrFrom16(b), 128-host)
	}
	if s.notes != nil {
		e.Note = s.notes[i]
	}
	if s.ends != nil && s.ends[i] != 0 {
		e.Expires = time.Unix(0, s.ends[i])
	}
	return e
}

// entries returns every entry of the set, IPv4 first, in address order.
func (s *Set) entries() []Entry {
	out := make([]Entry, s.Len())
	for i := range out {
		out[i] = s.entry(i)
	}
	return out
}

// Entries returns the entries of the set, in order (IPv4 first), as the
// set holds them: an entry inside a wider one is not among them. It
// copies the set, for a program that hands the list on (protectd's
// CrowdSec API for bouncers); requests never call it.
func (s *Set) Entries() []Entry {
	if s == nil {
		return nil
	}
	out := make([]Entry, len(s.v4)+len(s.v6))
	for i := range out {
		out[i] = s.entry(i)
	}
	return out
}

// ErrSetTooWide is wrapped by the error of CheckCoverage: the set holds
// so much of an address family that it would refuse most clients.
var ErrSetTooWide = errors.New("covers too much of an address family")

// CheckCoverage judges the set as a whole, as no line-by-line check can:
// it returns an error wrapping ErrSetTooWide when the set covers half of
// the IPv4 space or more (2^31 addresses: 0.0.0.0/1 alone, or 0.0.0.0/1
// with 128.0.0.0/1), or half or more of IPv6's global unicast space,
// 2000::/3, where every routable client is (::/1 alone, or ::/1 with
// 8000::/1). IPv6 outside 2000::/3 (::/8, fc00::/7, fe80::/10, ff00::/8)
// is not counted, so a list of bogons that names it passes. No real
// list comes near half: FireHOL level 1, the widest common one, covers
// about 14% of IPv4, nearly all of it 224.0.0.0/3 and the private
// networks. A block list's load and a CrowdSec decision set that fail it
// are refused whole, and the last good set stays in force. nil is
// returned for a nil set.
func (s *Set) CheckCoverage() error {
	if s == nil {
		return nil
	}
	var v4 uint64
	for _, sp := range s.v4 {
		v4 += uint64(sp.hi-sp.lo) + 1
	}
	if v4 >= 1<<31 {
		return fmt.Errorf("%w: %s of IPv4 (half or more is refused)", ErrSetTooWide, share(float64(v4)/(1<<32)))
	}
	// 2000::/3 as integers; a sum of its parts fits in 128 bits.
	gLo, gHi := u128{hi: 0x2000_0000_0000_0000}, u128{hi: 0x3fff_ffff_ffff_ffff, lo: ^uint64(0)}
	var v6 u128
	for _, sp := range s.v6 {
		lo, hi := sp.lo, sp.hi
		if hi.less(gLo) || gHi.less(lo) {
			continue
		}
		if lo.less(gLo) {
			lo = gLo
		}
		if gHi.less(hi) {
			hi = gHi
		}
		n := hi.sub(lo)
		n = n.add(u128{lo: 1})
		v6 = v6.add(n)
	}
	if !v6.less(u128{hi: 1 << 60}) { // 2^124: half of 2^125
		return fmt.Errorf("%w: %s of IPv6's global unicast space 2000::/3 (half or more is refused)", ErrSetTooWide, share(float64(v6.hi)/(1<<61)))
	}
	return nil
}

// share writes a fraction as a percentage with one decimal, rounded
// down, so that 99.99% never shows as 100%.
func share(f float64) string {
	return strconv.FormatFloat(math.Floor(f*1000)/10, 'f', 1, 64) + "%"
}

func (a u128) add(b u128) u128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, c)
	return u128{hi, lo}
}

func (a u128) sub(b u128) u128 {
	lo, c := bits.Sub64(a.lo, b.lo, 0)
	hi, _ := bits.Sub64(a.hi, b.hi, c)
	return u128{hi, lo}
}
