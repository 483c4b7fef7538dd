package memstore

import (
	"net/netip"

	"github.com/httpprotect/protect/store"
)

// A heldBan is a ban as the memory store holds it: the record, and its end
// in the store's ticks (nanoseconds on the store's own monotonic clock; 0
// when permanent). A heldBan is never changed once published: a new ban
// replaces the pointer, so its record can be handed out without a copy.
type heldBan struct {
	ban store.Ban
	end int64
}

// live reports whether the ban is in force at ticks t.
func (b *heldBan) live(t int64) bool { return b.end == 0 || b.end > t }

// result answers a request refused by b at ticks t.
func (b *heldBan) result(t int64) store.Result { return store.BanResult(&b.ban, b.end, t) }

// rangeBans is one ban list's range bans, as the memory store checks them
// on every request.
type rangeBans = store.RangeSet

// rangeBanned checks addr against the range bans r at ticks t, and
// writes the answer of a ban that holds it into res.
func rangeBanned(r *rangeBans, addr netip.Addr, t int64, res *store.Result) bool {
	return r != nil && lookupRange(r, addr, t, res) // no range bans: the common case, in one compare
}

func lookupRange(r *rangeBans, addr netip.Addr, t int64, res *store.Result) bool {
	e, ok := r.Lookup(addr, t)
	if ok {
		*res = store.BanResult(&e.Ban, e.End, t)
	}
	return ok
}

// rangeList appends the live bans of r that f selects.
func rangeList(r *rangeBans, t int64, f store.BanFilter, out []store.Ban) []store.Ban {
	for _, e := range r.Live(t) {
		if f.Match(e.Ban) {
			out = append(out, e.Ban)
		}
	}
	return out
}

// rangeEntry returns r's entry on p, live or over.
func rangeEntry(r *rangeBans, p netip.Prefix) (store.RangeEntry, bool) {
	for _, e := range r.Without(netip.Prefix{}) {
		if e.Prefix == p {
			return e, true
		}
	}
	return store.RangeEntry{}, false
}
