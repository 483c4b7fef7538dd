package redisstore

import (
	"context"
	"errors"
	"fmt"

	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpprotect/protect/store"
)

// What a Store holds of Redis in this process, so that a banned
// flood never costs a round trip per request: a copy of each namespace's
// range bans, refreshed every RangeRefresh, and the key bans it has seen,
// each answered for at most BanCacheTTL. Both are bounded in age, so a
// lift reaches every instance within a second.

// redisNamespace is one namespace as this process sees it, shared by every
// Space bound to it.
type redisNamespace struct {
	name   string
	ranges atomic.Pointer[rangeBans] // nil: none
	loaded atomic.Bool               // ranges holds a copy; the refresher keeps it fresh
	mu     sync.Mutex                // serialises the first load
}

// namespace returns the state of ns, creating it on first use.
func (s *Store) namespace(ns string) *redisNamespace {
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	n, ok := s.namespaces[ns]
	if !ok {
		n = &redisNamespace{name: ns}
		s.namespaces[ns] = n
	}
	return n
}

// ready loads ns's range bans on its first Take, so that a fresh instance
// never serves a banned range.
func (s *Store) ready(ctx context.Context, ns *redisNamespace) error {
	if ns.loaded.Load() {
		return nil
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.loaded.Load() {
		return nil
	}
	if err := s.loadRanges(ctx, ns); err != nil {
		return err
	}
	ns.loaded.Store(true)
	return nil
}

func rangesKey(ns string) string { return ns + "ranges" }

// rangeCall runs the ranges script, through s.once so that its failures
// reach Store.failed (topology.go): the refresher calls it even while the
// circuit is open.
func (s *Store) rangeCall(ctx context.Context, ns string, args ...any) (now int64, bans []store.Ban, err error) {
	v, err := rangesScript.Run(ctx, s.once(), []string{rangesKey(ns)}, args...).Slice()
	if err != nil {
		return 0, nil, fmt.Errorf("protect: redis range bans: %w", err)
	}
	now, bans, err = decodeRanges(v, func(field string, err error) {
		s.logDamage(rangesKey(ns), field, "protect: skipping a range ban whose field is not a range", "range", field, "error", err)
	})
	if err != nil {
		return 0, nil, fmt.Errorf("protect: redis range bans: %w", err)
	}
	return now, bans, nil
}

// loadRanges replaces ns's range bans with what Redis holds, converting
// Redis' expiry times into local ticks.
func (s *Store) loadRanges(ctx context.Context, ns *redisNamespace) error {
	now, bans, err := s.rangeCall(ctx, ns.name, "list")
	if err != nil {
		return err
	}
	t := s.now()
	held := make([]store.RangeEntry, 0, len(bans))
	for _, b := range bans {
		if b.Malformed != "" { // refuses nothing: see protect.ErrMalformed
			s.logDamage(rangesKey(ns.name), b.Key.String(), "protect: malformed range ban record, not enforced; lift it (protectctl lift) or repair it",
				"key", rangesKey(ns.name), "range", b.Key.String(), "error", b.Malformed)
			continue
		}
		h := store.RangeEntry{Prefix: b.Key.Prefix, Ban: b}
		if !b.Permanent() {
			h.End = t + int64(time.Duration(b.Expires.UnixMilli()-now)*time.Millisecond)
		}
		held = append(held, h)
	}
	ns.ranges.Store(store.NewRangeSet(held))
	return nil
}

// reloadRanges re-reads ns's range bans after a change through this store,
// if this store serves ns. One that does not (protectctl, say) has no copy
// to bring up to date: its first Take in ns loads one.
func (s *Store) reloadRanges(ctx context.Context, ns *redisNamespace) {
	if ns.loaded.Load() {
		s.loadRanges(ctx, ns)
	}
}

// Refresh re-reads the range bans of every namespace in use now, rather
// than at the next RangeRefresh tick, and writes again the limits this
// store's spaces published when republishEvery has passed since it last
// did (published.go).
func (s *Store) Refresh(ctx context.Context) error {
	s.nsMu.Lock()
	var inUse []*redisNamespace
	for _, ns := range s.namespaces {
		if ns.loaded.Load() {
			inUse = append(inUse, ns)
		}
	}
	s.nsMu.Unlock()
	var errs []error
	for _, ns := range inUse {
		if err := s.loadRanges(ctx, ns); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.republish(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// refreshEvery re-reads the range bans of every namespace in use, logging
// one line when refreshing starts failing and one when it recovers.
func (s *Store) refreshEvery(interval time.Duration) {
	defer s.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(interval, time.Second))
		err := s.Refresh(ctx)
		cancel()
		if (err != nil) != failing {
			failing = err != nil
			if failing {
				s.log.Error("protect: cannot refresh range bans and published limits; keeping the last copy", "error", err)
			} else {
				s.log.Info("protect: range bans and published limits refreshed again")
			}
		}
	}
}

type cacheKey struct {
	ns *redisNamespace
	k  store.Key
}

type cachedBan struct {
	ban   *store.Ban
	end   int64 // ticks: the ban's end; 0 when permanent
	until int64 // ticks: the cached answer is used until then
}

// live reports whether the cached ban is in force at ticks t.
func (c *cachedBan) live(t int64) bool { return c.end == 0 || c.end > t }

// rangeBans is one ban list's range bans, as this process checks them.
type rangeBans = store.RangeSet

// rangeBanned checks addr against the range bans r at ticks t.
func rangeBanned(r *rangeBans, addr netip.Addr, t int64) (store.Result, bool) {
	if r == nil { // no range bans: the common case, in one compare
		return store.Result{}, false
	}
	return lookupRange(r, addr, t)
}

func lookupRange(r *rangeBans, addr netip.Addr, t int64) (store.Result, bool) {
	e, ok := r.Lookup(addr, t)
	if !ok {
		return store.Result{}, false
	}
	return store.BanResult(&e.Ban, e.End, t), true
}

// lookupBan answers from the local ban cache.
func (s *Store) lookupBan(ns *redisNamespace, k store.Key, t int64) (store.Result, bool) {
	if s.cached.Load() == 0 { // the common case: nothing banned here lately
		return store.Result{}, false
	}
	s.cacheMu.Lock()
	c, ok := s.cache[cacheKey{ns, k}]
	s.cacheMu.Unlock()
	if !ok || t >= c.until {
		return store.Result{}, false
	}
	return store.BanResult(c.ban, c.end, t), true
}

// remember caches a ban answer for at most BanCacheTTL, and never past
// the ban's end.
func (s *Store) remember(ns *redisNamespace, k store.Key, r store.Result, t int64) {
	if s.cacheTTL < 0 {
		return
	}
	b := *r.Ban
	c := cachedBan{ban: &b, until: t + int64(s.cacheTTL)}
	if !b.Permanent() {
		c.end = t + int64(r.BanLeft)
		c.until = min(c.until, c.end)
	}
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if len(s.cache) >= s.maxCache {
		for key, old := range s.cache {
			if t >= old.until {
				delete(s.cache, key)
			}
		}
		if len(s.cache) >= s.maxCache {
			clear(s.cache) // every entry is younger than BanCacheTTL: drop them all
		}
	}
	s.cache[cacheKey{ns, k}] = c
	s.cached.Store(int64(len(s.cache)))
}

// seenUnbanned drops the cached ban of k, if it has aged past
// BanCacheTTL, once Redis has answered at t that k is not banned: a
// lift made elsewhere and seen here must not come back through HeldBan
// when Redis fails later. A younger entry is another request's newer
// answer, and stays.
func (s *Store) seenUnbanned(ns *redisNamespace, k store.Key, t int64) {
	if s.cached.Load() == 0 { // the common case: nothing banned here lately
		return
	}
	s.cacheMu.Lock()
	if c, ok := s.cache[cacheKey{ns, k}]; ok && t >= c.until {
		delete(s.cache, cacheKey{ns, k})
		s.cached.Store(int64(len(s.cache)))
	}
	s.cacheMu.Unlock()
}

// forget drops a cached ban, after a lift or a new ban through this store.
func (s *Store) forget(ns *redisNamespace, k store.Key) {
	s.cacheMu.Lock()
	delete(s.cache, cacheKey{ns, k})
	s.cached.Store(int64(len(s.cache)))
	s.cacheMu.Unlock()
}

// HeldBan implements protect.BanHolder: the range bans of the last
// refresh, and a cached key ban until the ban's own end (past
// BanCacheTTL, which bounds how soon a lift elsewhere is seen: no lift
// can be seen while Redis cannot be asked).
func (sp *redisSpace) HeldBan(k store.Key, addr netip.Addr) (store.Result, bool) {
	t := sp.s.now()
	if r, banned := rangeBanned(sp.bns.ranges.Load(), addr, t); banned {
		return r, true
	}
	s := sp.s
	if s.cached.Load() == 0 {
		return store.Result{}, false
	}
	s.cacheMu.Lock()
	c, ok := s.cache[cacheKey{sp.bns, k}]
	s.cacheMu.Unlock()
	if !ok || !c.live(t) {
		return store.Result{}, false
	}
	return store.BanResult(c.ban, c.end, t), true
}

// RangeBans implements protect.RangeBanCounter.
func (sp *redisSpace) RangeBans() int { return sp.bns.ranges.Load().Len(sp.s.now()) }
