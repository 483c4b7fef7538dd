package redisstore

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"

	"github.com/httpprotect/protect/store"
)

// The allowlist (store.Allowlist): one hash per ban namespace,
// <bns>allows, of "key:<prefix>" or "range:<prefix>" → a record as a
// ban's. Like the range bans, it is read whole into a local copy on a
// namespace's first Take and again every RangeRefresh, and checked there
// before anything else: an allowed client never costs a round trip, and
// an entry made through another instance holds here within
// RangeRefresh (at once through this one); until then that instance may
// still count and ban the client. A Take is therefore still one script,
// which the allowlist does not lengthen. An allowlist that cannot be
// read (a key of another type, a reply that does not parse) is logged
// and leaves the copy as it was: it never stops the namespace.

func allowsKey(bns string) string { return bns + "allows" }

// allowStreamKey is the stream where bns's allowlist is journaled: the
// one of the slot of its hash, as rangeStreamKey is the ranges'.
func (s *Store) allowStreamKey(bns string) string {
	if !s.topo.isCluster() {
		return bns + "events"
	}
	return streamKey(slotIndexKey(bns, keySlot([]byte(allowsKey(bns)))))
}

// allowField is the hash field of an entry on k.
func allowField(k store.Key, isRange bool) string {
	if isRange {
		return "range:" + k.Prefix.String()
	}
	return "key:" + k.Prefix.String()
}

// allowCall runs the allows script on ns's hash and decodes its entries.
func (s *Store) allowCall(ctx context.Context, ns string, args ...any) (now int64, entries []store.Ban, err error) {
	v, err := allowsScript.Run(ctx, s.once(), []string{allowsKey(ns), s.allowStreamKey(ns)}, append([]any{s.journal}, args...)...).Slice()
	if err != nil {
		return 0, nil, fmt.Errorf("protect: redis allowlist: %w", err)
	}
	if len(v) == 0 || len(v)%2 != 1 {
		return 0, nil, fmt.Errorf("protect: redis allowlist: unexpected reply of %d values", len(v))
	}
	if now, err = toInt(v[0]); err != nil {
		return 0, nil, fmt.Errorf("protect: redis allowlist: %w", err)
	}
	for i := 1; i+1 < len(v); i += 2 {
		field, rec := str(v[i]), str(v[i+1])
		kind, pfx, _ := strings.Cut(field, ":")
		p, perr := netip.ParsePrefix(pfx)
		if perr != nil || (kind != "key" && kind != "range") {
			s.damage.logOnce(allowsKey(ns), field, "protect: skipping an allowlist entry whose field is not key:PREFIX or range:PREFIX", "field", field)
			continue
		}
		b, derr := decodeBan(store.Key{Prefix: p}, kind == "range", rec)
		if derr != nil {
			s.damage.logOnce(allowsKey(ns), field, "protect: skipping a malformed allowlist entry; disallow it and allow it again",
				"key", allowsKey(ns), "entry", field, "error", derr.Error())
			continue
		}
		b.Source = "" // an entry has none; the record says manual for decodeBan
		entries = append(entries, b)
	}
	return now, entries, nil
}

// loadAllows replaces ns's copy of the allowlist with what Redis holds.
func (s *Store) loadAllows(ctx context.Context, ns *redisNamespace) error {
	now, entries, err := s.allowCall(ctx, ns.name, "list")
	if err != nil {
		s.damage.logOnce(allowsKey(ns.name), "", "protect: cannot read the allowlist; keeping the last copy", "key", allowsKey(ns.name), "error", err.Error())
		return err
	}
	ns.allows.Store(store.NewRangeSet(s.rangeEntries(now, entries)))
	return nil
}

// rangeEntries are entries as a RangeSet holds them, their ends in this
// store's ticks from Redis' time now (ms).
func (s *Store) rangeEntries(now int64, entries []store.Ban) []store.RangeEntry {
	t := s.now()
	out := make([]store.RangeEntry, 0, len(entries))
	for _, b := range entries {
		e := store.RangeEntry{Prefix: b.Key.Prefix, Ban: b}
		if !b.Permanent() {
			e.End = endTicks(t, b.Expires.UnixMilli()-now)
		}
		out = append(out, e)
	}
	return out
}

// endTicks is ticks t plus left ms, saturated: an end past what ticks
// hold is as good as never, and must neither wrap nor read as 0, which
// is permanent.
func endTicks(t, left int64) int64 {
	if left <= 0 {
		return t // over: Live is false from now
	}
	if left > (math.MaxInt64-t)/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return t + left*int64(time.Millisecond)
}

// allowed reports whether an entry of ns's copy holds addr at ticks t.
// Take and TakePlan write it out, so that nothing allowed, the common
// case, costs one load and one compare there.
func allowed(ns *redisNamespace, addr netip.Addr, t int64) bool {
	al := ns.allows.Load()
	return al != nil && lookupAllow(al, addr, t)
}

func lookupAllow(al *store.RangeSet, addr netip.Addr, t int64) bool {
	_, ok := al.Lookup(addr, t)
	return ok
}

// allowCovers reports whether an entry of ns's copy holds all of p.
func allowCovers(ns *redisNamespace, p netip.Prefix, t int64) bool {
	for _, e := range ns.allows.Load().Live(t) {
		if e.Prefix.Bits() <= p.Bits() && e.Prefix.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// Allow implements store.Allowlist.
func (sp *redisSpace) Allow(ctx context.Context, e store.Ban, length time.Duration) (store.Ban, error) {
	if !e.Key.Prefix.IsValid() {
		return store.Ban{}, fmt.Errorf("protect: redis allow %s: %w", e.Key, store.ErrNotAllowable)
	}
	e.Key.Prefix = e.Key.Prefix.Masked()
	if strings.Contains(e.By, "|") {
		return store.Ban{}, fmt.Errorf("protect: redis allow %s: by %q: '|' separates a record's fields", e.Key, e.By)
	}
	ms := length.Milliseconds()
	if length > 0 && ms == 0 {
		ms = 1
	}
	_, got, err := sp.s.allowCall(ctx, sp.bns.name, "put", allowField(e.Key, e.Range), ms, e.By, e.Reason)
	if err != nil {
		return store.Ban{}, err
	}
	if len(got) != 1 {
		return store.Ban{}, fmt.Errorf("protect: redis allow %s: the entry written does not read back", e.Key)
	}
	sp.s.reloadRanges(ctx, sp.bns) // this instance sees it at once
	return got[0], nil
}

// Disallow implements store.Allowlist.
func (sp *redisSpace) Disallow(ctx context.Context, k store.Key) (store.Ban, bool, error) {
	if !k.Prefix.IsValid() {
		return store.Ban{}, false, fmt.Errorf("protect: redis disallow %s: %w", k, store.ErrNotAllowable)
	}
	_, got, err := sp.s.allowCall(ctx, sp.bns.name, "remove", k.Prefix.Masked().String())
	if err != nil {
		return store.Ban{}, false, err
	}
	sp.s.reloadRanges(ctx, sp.bns)
	if len(got) == 0 {
		return store.Ban{}, false, nil
	}
	return got[0], true, nil
}

// Holds implements store.Allowlist: the copy of the last refresh, none
// before this store's first Take in the namespace.
func (sp *redisSpace) Holds(addr netip.Addr) bool { return allowed(sp.bns, addr, sp.s.now()) }

// Allows implements store.Allowlist.
func (sp *redisSpace) Allows(ctx context.Context) ([]store.Ban, error) {
	_, got, err := sp.s.allowCall(ctx, sp.bns.name, "list")
	if err != nil {
		return nil, err
	}
	if got == nil {
		got = []store.Ban{}
	}
	return got, nil
}
