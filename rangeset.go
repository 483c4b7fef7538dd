package protect

import (
	"net/netip"
	"time"

	"github.com/httpprotect/protect/internal/rangeset"
)

// A heldBan is a ban as the memory store holds it: the record, and its end
// in the store's ticks (nanoseconds on the store's own monotonic clock; 0
// when permanent). A heldBan is never changed once published: a new ban
// replaces the pointer, so its record can be handed out without a copy.
type heldBan struct {
	ban Ban
	end int64
}

// live reports whether the ban is in force at ticks t.
func (b *heldBan) live(t int64) bool { return b.end == 0 || b.end > t }

// result answers a request refused by b at ticks t.
func (b *heldBan) result(t int64) Result { return BanResult(&b.ban, b.end, t) }

// BanResult is the Result of a request refused by ban b at now, for a ban
// that ends at end (0: never), both in nanoseconds of the store's own
// clock from an epoch of its choosing (BanLeft is their difference; keep
// the epoch before any ban's end, so that no real end is 0). The Result
// points at b: a store that keeps b unchanged once published hands it
// out without a copy.
func BanResult(b *Ban, end, now int64) Result {
	r := Result{Ban: b}
	if end != 0 {
		r.BanLeft = time.Duration(end - now)
	}
	return r
}

// rangeBans is one ban list's range bans, as the memory store checks them
// on every request.
type rangeBans = rangeset.Set[Ban]

// rangeBanned checks addr against the range bans r at ticks t, and
// writes the answer of a ban that holds it into res. Written through a
// pointer rather than returned: a Result returned from an inlined call
// is stored a word at a time and copied in 16-byte loads, which wait for
// those stores, on every request, banned or not.
func rangeBanned(r *rangeBans, addr netip.Addr, t int64, res *Result) bool {
	return r != nil && lookupRange(r, addr, t, res) // no range bans: the common case, in one compare
}

func lookupRange(r *rangeBans, addr netip.Addr, t int64, res *Result) bool {
	e, ok := r.Lookup(addr, t)
	if ok {
		*res = BanResult(&e.Value, e.End, t)
	}
	return ok
}

// rangeList appends the live bans of r that f selects.
func rangeList(r *rangeBans, t int64, f BanFilter, out []Ban) []Ban {
	for _, e := range r.Live(t) {
		if f.Match(e.Value) {
			out = append(out, e.Value)
		}
	}
	return out
}
