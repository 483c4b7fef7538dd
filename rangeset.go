package protect

import (
	"net/netip"
	"time"

	"go4.org/netipx"
)

// A heldBan is a ban as a store holds it in this process: the record, and
// its end in the store's ticks (nanoseconds on the store's own monotonic
// clock; 0 when permanent). A heldBan is never changed once published: a
// new ban replaces the pointer, so its record can be handed out without a
// copy.
type heldBan struct {
	ban Ban
	end int64
}

// live reports whether the ban is in force at ticks t.
func (b *heldBan) live(t int64) bool { return b.end == 0 || b.end > t }

// result answers a request refused by b at ticks t.
func (b *heldBan) result(t int64) Result {
	r := Result{Banned: true, Ban: &b.ban}
	if b.end != 0 {
		r.BanLeft = time.Duration(b.end - t)
	}
	return r
}

// A rangeSet is an immutable snapshot of one namespace's range bans, as
// both stores check them on every request: the memory store holds its
// range bans in one, and the Redis store checks a local copy of the ranges
// hash, so that a banned network never costs a round trip.
//
// A nil *rangeSet holds no bans, and answers in one nil check: the common
// case, a namespace without range bans, costs nothing more.
type rangeSet struct {
	cover *netipx.IPSet // the union of every range, for a fast miss
	bans  []heldBan
}

// newRangeSet indexes bans; nil when there are none.
func newRangeSet(bans []heldBan) *rangeSet {
	if len(bans) == 0 {
		return nil
	}
	var sb netipx.IPSetBuilder
	for _, b := range bans {
		sb.AddPrefix(b.ban.Key.Prefix)
	}
	cover, _ := sb.IPSet() // only valid prefixes are ever added
	return &rangeSet{cover: cover, bans: bans}
}

// banned checks addr against the range bans at ticks t.
func (r *rangeSet) banned(addr netip.Addr, t int64) (Result, bool) {
	if r == nil || !addr.IsValid() || !r.cover.Contains(addr) {
		return Result{}, false
	}
	var best *heldBan // the covering ban that ends last
	for i := range r.bans {
		b := &r.bans[i]
		if !b.ban.Key.Prefix.Contains(addr) || !b.live(t) {
			continue
		}
		if best == nil || b.end == 0 || (best.end != 0 && b.end > best.end) {
			best = b
		}
	}
	if best == nil {
		return Result{}, false
	}
	return best.result(t), true
}

// find returns the live ban on exactly range k.
func (r *rangeSet) find(k Key, t int64) (*heldBan, bool) {
	if r == nil {
		return nil, false
	}
	for i := range r.bans {
		if b := &r.bans[i]; b.ban.Key == k && b.live(t) {
			return b, true
		}
	}
	return nil, false
}

// list appends the live bans that f selects.
func (r *rangeSet) list(t int64, f BanFilter, out []Ban) []Ban {
	if r == nil {
		return out
	}
	for i := range r.bans {
		if b := &r.bans[i]; b.live(t) && f.Match(b.ban) {
			out = append(out, b.ban)
		}
	}
	return out
}

// with returns a set in which b replaces any ban on its range.
func (r *rangeSet) with(b heldBan) *rangeSet {
	return newRangeSet(append(r.without(b.ban.Key), b))
}

// without returns the bans other than the one on range k, in a new slice.
func (r *rangeSet) without(k Key) []heldBan {
	if r == nil {
		return nil
	}
	out := make([]heldBan, 0, len(r.bans)+1)
	for _, b := range r.bans {
		if b.ban.Key != k {
			out = append(out, b)
		}
	}
	return out
}

// swept returns the set without the bans over at ticks t, or r itself when
// none is.
func (r *rangeSet) swept(t int64) *rangeSet {
	if r == nil {
		return nil
	}
	live := make([]heldBan, 0, len(r.bans))
	for _, b := range r.bans {
		if b.live(t) {
			live = append(live, b)
		}
	}
	if len(live) == len(r.bans) {
		return r
	}
	return newRangeSet(live)
}

// inRange reports whether the counting key p lies inside range r, as
// BanFilter.Within selects it.
func inRange(r, p netip.Prefix) bool {
	return r.Bits() <= p.Bits() && r.Contains(p.Addr())
}
