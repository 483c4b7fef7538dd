// Package rangeset holds the range bans of one ban list as the stores of
// protect check them on every request: an immutable snapshot, swapped
// whole when a range is banned or lifted, so that a request reads it
// without a lock. The memory store keeps its range bans in one; the Redis
// store checks a local copy of its ranges hash, so that a banned network
// never costs a round trip.
package rangeset

import (
	"net/netip"

	"go4.org/netipx"
)

// An Entry is one range ban: its range, its end in the store's ticks
// (0 when permanent), and what the store keeps of it.
type Entry[T any] struct {
	Prefix netip.Prefix
	End    int64
	Value  T
}

// Live reports whether the entry is in force at ticks t.
func (e *Entry[T]) Live(t int64) bool { return e.End == 0 || e.End > t }

// A Set is an immutable set of range bans. A nil *Set holds none, and
// answers in one nil check: the common case, a ban list without range
// bans, costs nothing more.
type Set[T any] struct {
	cover   *netipx.IPSet // the union of every range, for a fast miss
	entries []Entry[T]
}

// New indexes entries, which it keeps; nil when there are none.
func New[T any](entries []Entry[T]) *Set[T] {
	if len(entries) == 0 {
		return nil
	}
	var sb netipx.IPSetBuilder
	for _, e := range entries {
		sb.AddPrefix(e.Prefix)
	}
	cover, _ := sb.IPSet() // only valid prefixes are ever added
	return &Set[T]{cover: cover, entries: entries}
}

// Lookup returns the live entry covering addr at ticks t that ends last
// (a permanent one first).
func (s *Set[T]) Lookup(addr netip.Addr, t int64) (*Entry[T], bool) {
	if s == nil || !addr.IsValid() || !s.cover.Contains(addr) {
		return nil, false
	}
	var best *Entry[T]
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
func (s *Set[T]) Find(p netip.Prefix, t int64) (*Entry[T], bool) {
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
func (s *Set[T]) Live(t int64) []*Entry[T] {
	if s == nil {
		return nil
	}
	var out []*Entry[T]
	for i := range s.entries {
		if e := &s.entries[i]; e.Live(t) {
			out = append(out, e)
		}
	}
	return out
}

// Len returns the number of entries in force at ticks t.
func (s *Set[T]) Len(t int64) int {
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
func (s *Set[T]) With(e Entry[T]) *Set[T] { return New(append(s.Without(e.Prefix), e)) }

// Without returns the entries other than the one on p, in a new slice.
func (s *Set[T]) Without(p netip.Prefix) []Entry[T] {
	if s == nil {
		return nil
	}
	out := make([]Entry[T], 0, len(s.entries)+1)
	for _, e := range s.entries {
		if e.Prefix != p {
			out = append(out, e)
		}
	}
	return out
}

// Swept returns the set without the entries over at ticks t, or s itself
// when none is.
func (s *Set[T]) Swept(t int64) *Set[T] {
	if s == nil {
		return nil
	}
	live := make([]Entry[T], 0, len(s.entries))
	for _, e := range s.entries {
		if e.Live(t) {
			live = append(live, e)
		}
	}
	if len(live) == len(s.entries) {
		return s
	}
	return New(live)
}
