package store

// Range bans as the stores check them on every request: an immutable
// snapshot, swapped whole when a range is banned or lifted, so that a
// request reads it without a lock. The memory store keeps its range bans
// in one; the Redis store checks a local copy of its ranges hash, so that
// a banned network never costs a round trip.

import (
	"net/netip"

	"go4.org/netipx"
)

// A RangeEntry is one range ban of a RangeSet: its range, its end in
// the store's ticks (0 when permanent), and the ban. The zero RangeEntry
// covers nothing.
type RangeEntry struct {
	Prefix netip.Prefix
	End    int64
	Ban    Ban
}

// Live reports whether the entry is in force at ticks t.
func (e *RangeEntry) Live(t int64) bool { return e.End == 0 || e.End > t }

// A RangeSet is an immutable set of range bans. A nil *RangeSet holds
// none, and answers in one nil check: the common case, a ban list without
// range bans, costs nothing more.
type RangeSet struct {
	cover   *netipx.IPSet // the union of every range, for a fast miss
	entries []RangeEntry
}

// NewRangeSet indexes entries, which it keeps; nil when there are none.
func NewRangeSet(entries []RangeEntry) *RangeSet {
	if len(entries) == 0 {
		return nil
	}
	var sb netipx.IPSetBuilder
	for _, e := range entries {
		sb.AddPrefix(e.Prefix)
	}
	cover, _ := sb.IPSet() // only valid prefixes are ever added
	return &RangeSet{cover: cover, entries: entries}
}

// Lookup returns the live entry covering addr at ticks t that ends last
// (a permanent one first).
func (s *RangeSet) Lookup(addr netip.Addr, t int64) (*RangeEntry, bool) {
	if s == nil || !addr.IsValid() || !s.cover.Contains(addr) {
		return nil, false
	}
	var best *RangeEntry
	for i := range s.entries {
		e := &s.entries[i]
		if !e.Prefix.Contains(addr) || !e.Live(t) {
			continue
		}
		if best == nil || e.End == 0 || (best.End != 0 && e.End > best.End) {
			best = e
		}
	}
	return best, best != nil
}

// Find returns the live entry on exactly p.
func (s *RangeSet) Find(p netip.Prefix, t int64) (*RangeEntry, bool) {
	if s == nil {
		return nil, false
	}
	for i := range s.entries {
		if e := &s.entries[i]; e.Prefix == p && e.Live(t) {
			return e, true
		}
	}
	return nil, false
}

// Live returns the entries in force at ticks t, in a new slice.
func (s *RangeSet) Live(t int64) []*RangeEntry {
	if s == nil {
		return nil
	}
	var out []*RangeEntry
	for i := range s.entries {
		if e := &s.entries[i]; e.Live(t) {
			out = append(out, e)
		}
	}
	return out
}

// Len returns the number of entries in force at ticks t.
func (s *RangeSet) Len(t int64) int {
	n := 0
	if s != nil {
		for i := range s.entries {
			if s.entries[i].Live(t) {
				n++
			}
		}
	}
	return n
}

// With returns a set in which e replaces any entry on its range.
func (s *RangeSet) With(e RangeEntry) *RangeSet { return NewRangeSet(append(s.Without(e.Prefix), e)) }

// Without returns the entries other than the one on p, in a new slice.
func (s *RangeSet) Without(p netip.Prefix) []RangeEntry {
	if s == nil {
		return nil
	}
	out := make([]RangeEntry, 0, len(s.entries)+1)
	for _, e := range s.entries {
		if e.Prefix != p {
			out = append(out, e)
		}
	}
	return out
}

// Swept returns the set without the entries over at ticks t, or s itself
// when none is.
func (s *RangeSet) Swept(t int64) *RangeSet {
	if s == nil {
		return nil
	}
	live := make([]RangeEntry, 0, len(s.entries))
	for _, e := range s.entries {
		if e.Live(t) {
			live = append(live, e)
		}
	}
	if len(live) == len(s.entries) {
		return s
	}
	return NewRangeSet(live)
}
