package memstore

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/httpprotect/protect/store"
)

// The memory store's allowlist (store.Allowlist): each ban namespace
// keeps its entries in an immutable store.RangeSet, swapped whole under
// the store's lock when an entry is added or removed, so that a request
// reads it without a lock, and one nil check when nothing is allowed.
// A key entry is the range of its key's prefix. With a state file the
// entries are kept in it, beside the bans, and written as they are.

// allowed reports whether an entry of al live at ticks t holds addr.
func allowed(al *store.RangeSet, addr netip.Addr, t int64) bool {
	_, ok := al.Lookup(addr, t)
	return ok
}

// covers reports whether an entry of al live at ticks t holds all of p.
func covers(al *store.RangeSet, p netip.Prefix, t int64) bool {
	for _, e := range al.Live(t) {
		if e.Prefix.Bits() <= p.Bits() && e.Prefix.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// unlessAllowed undoes the ban a Take of k just wrote into r when an
// entry now holds addr: one added while the Take counted, whose lift
// (admin.Admin.Allow lifts right after adding) may have come before the
// ban. The entry is stored before that lift, so one of the two sees the
// other and the ban never outlives them.
func (sp *memSpace) unlessAllowed(k store.Key, addr netip.Addr, r *store.Result) {
	al := sp.bns.allows.Load()
	if al == nil || !allowed(al, addr, sp.s.now()) {
		return
	}
	sp.Lift(context.Background(), k)
	*r = store.Result{Allowed: true}
}

// Allow implements store.Allowlist.
func (sp *memSpace) Allow(_ context.Context, e store.Ban, length time.Duration) (store.Ban, error) {
	if !e.Key.Prefix.IsValid() {
		return store.Ban{}, fmt.Errorf("memstore: allow %s: %w", e.Key, store.ErrNotAllowable)
	}
	t := sp.s.now()
	e.Key.Prefix = e.Key.Prefix.Masked()
	e.Source, e.Offense = "", 0
	e.Created, e.Expires = sp.s.timeAt(t), time.Time{}
	held := &heldBan{ban: e}
	if length > 0 {
		held.end = satAdd(t, int64(length))
		held.ban.Expires = sp.s.timeAt(held.end)
	}
	sp.s.mu.Lock()
	sp.bns.allows.Store(sp.bns.allows.Load().With(store.RangeEntry{Prefix: e.Key.Prefix, End: held.end, Ban: held.ban}))
	sp.bns.events.add(store.EventAllow, held, t)
	sp.s.mu.Unlock()
	sp.s.journal.noteAllow(sp.bns.id, e.Key.Prefix)
	return held.ban, nil
}

// Disallow implements store.Allowlist.
func (sp *memSpace) Disallow(_ context.Context, k store.Key) (store.Ban, bool, error) {
	if !k.Prefix.IsValid() {
		return store.Ban{}, false, fmt.Errorf("memstore: disallow %s: %w", k, store.ErrNotAllowable)
	}
	p := k.Prefix.Masked()
	t := sp.s.now()
	sp.s.mu.Lock()
	al := sp.bns.allows.Load()
	e, ok := al.Find(p, t)
	var b store.Ban
	if ok {
		// The set before the event, as for a lift: a reader that finds
		// the event finds the entry gone.
		b = e.Ban
		sp.bns.allows.Store(store.NewRangeSet(al.Without(p)))
		sp.bns.events.add(store.EventDisallow, &heldBan{ban: b, end: e.End}, t)
	}
	sp.s.mu.Unlock()
	if ok {
		sp.s.journal.noteAllow(sp.bns.id, p)
	}
	return b, ok, nil
}

// Holds implements store.Allowlist.
func (sp *memSpace) Holds(addr netip.Addr) bool {
	al := sp.bns.allows.Load()
	return al != nil && allowed(al, addr, sp.s.now())
}

// Allows implements store.Allowlist. It journals the end of each entry
// over, as the sweep does, so that a listing never shows an entry gone
// before its end is in the journal.
func (sp *memSpace) Allows(context.Context) ([]store.Ban, error) {
	t := sp.s.now()
	sp.s.mu.Lock()
	sp.s.sweepSet(sp.bns, &sp.bns.allows, t, store.EventAllowExpire, sp.s.journal.noteAllow)
	sp.s.mu.Unlock()
	live := sp.bns.allows.Load().Live(t)
	out := make([]store.Ban, 0, len(live))
	for _, e := range live {
		out = append(out, e.Ban)
	}
	return out, nil
}
