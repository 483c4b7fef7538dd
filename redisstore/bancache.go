package redisstore

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpprotect/protect/store"
)

// What a Store holds of Redis in this process, so that a banned
// flood never costs a round trip per request: a copy of each namespace's
// range bans, refreshed every RangeRefresh (bans.go), and the key bans it
// has seen, each answered for at most BanCacheTTL. Both are bounded in
// age, so a lift reaches every instance within a second.

// banCache is the ban namespaces in use, with their copies of the range
// bans, and the key bans this store has seen.
type banCache struct {
	ttl time.Duration // BanCacheTTL; negative: key bans are not cached
	max int           // MaxCachedBans

	nsMu       sync.Mutex // guards namespaces (also read by Store.Refresh)
	namespaces map[string]*redisNamespace

	mu     sync.Mutex // guards keys
	keys   map[cacheKey]cachedBan
	cached atomic.Int64 // len(keys), read without the lock
}

// redisNamespace is one namespace as this process sees it, shared by every
// Space bound to it.
type redisNamespace struct {
	name   string
	ranges atomic.Pointer[rangeBans]      // nil: none
	allows atomic.Pointer[store.RangeSet] // the allowlist (allows.go); nil: none
	loaded atomic.Bool                    // ranges and allows hold a copy; the refresher keeps them fresh
	mu     sync.Mutex                     // serialises the first load
}

// namespace returns the state of ns, creating it on first use.
func (c *banCache) namespace(ns string) *redisNamespace {
	c.nsMu.Lock()
	defer c.nsMu.Unlock()
	n, ok := c.namespaces[ns]
	if !ok {
		n = &redisNamespace{name: ns}
		c.namespaces[ns] = n
	}
	return n
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

// lookup answers from the local ban cache.
func (c *banCache) lookup(ns *redisNamespace, k store.Key, t int64) (store.Result, bool) {
	if c.cached.Load() == 0 { // the common case: nothing banned here lately
		return store.Result{}, false
	}
	c.mu.Lock()
	b, ok := c.keys[cacheKey{ns, k}]
	c.mu.Unlock()
	if !ok || t >= b.until {
		return store.Result{}, false
	}
	return store.BanResult(b.ban, b.end, t), true
}

// remember caches a ban answer for at most BanCacheTTL, and never past
// the ban's end.
func (c *banCache) remember(ns *redisNamespace, k store.Key, r store.Result, t int64) {
	if c.ttl < 0 {
		return
	}
	b := *r.Ban
	e := cachedBan{ban: &b, until: t + int64(c.ttl)}
	if !b.Permanent() {
		e.end = t + int64(r.BanLeft)
		e.until = min(e.until, e.end)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.keys) >= c.max {
		for key, old := range c.keys {
			if t >= old.until {
				delete(c.keys, key)
			}
		}
		if len(c.keys) >= c.max {
			clear(c.keys) // every entry is younger than BanCacheTTL: drop them all
		}
	}
	c.keys[cacheKey{ns, k}] = e
	c.cached.Store(int64(len(c.keys)))
}

// seenUnbanned drops the cached ban of k, if it has aged past
// BanCacheTTL, once Redis has answered at t that k is not banned: a
// lift made elsewhere and seen here must not come back through HeldBan
// when Redis fails later. A younger entry is another request's newer
// answer, and stays.
func (c *banCache) seenUnbanned(ns *redisNamespace, k store.Key, t int64) {
	if c.cached.Load() == 0 { // the common case: nothing banned here lately
		return
	}
	c.mu.Lock()
	if b, ok := c.keys[cacheKey{ns, k}]; ok && t >= b.until {
		delete(c.keys, cacheKey{ns, k})
		c.cached.Store(int64(len(c.keys)))
	}
	c.mu.Unlock()
}

// forget drops a cached ban, after a lift or a new ban through this store.
func (c *banCache) forget(ns *redisNamespace, k store.Key) {
	c.mu.Lock()
	delete(c.keys, cacheKey{ns, k})
	c.cached.Store(int64(len(c.keys)))
	c.mu.Unlock()
}

// held answers HeldBan at ticks t: the range bans of ns's last refresh,
// and a cached key ban until the ban's own end.
func (c *banCache) held(ns *redisNamespace, k store.Key, addr netip.Addr, t int64) (store.Result, bool) {
	if allowed(ns, addr, t) {
		return store.Result{}, false
	}
	if r, banned := rangeBanned(ns.ranges.Load(), addr, t); banned {
		return r, true
	}
	if c.cached.Load() == 0 {
		return store.Result{}, false
	}
	c.mu.Lock()
	b, ok := c.keys[cacheKey{ns, k}]
	c.mu.Unlock()
	if !ok || !b.live(t) {
		return store.Result{}, false
	}
	return store.BanResult(b.ban, b.end, t), true
}

// HeldBan implements store.BanHolder: the range bans of the last
// refresh, and a cached key ban until the ban's own end (past
// BanCacheTTL, which bounds how soon a lift elsewhere is seen: no lift
// can be seen while Redis cannot be asked).
func (sp *redisSpace) HeldBan(k store.Key, addr netip.Addr) (store.Result, bool) {
	return sp.s.bans.held(sp.bns, k, addr, sp.s.now())
}

// RangeBans implements store.RangeBanCounter.
func (sp *redisSpace) RangeBans() int { return sp.bns.ranges.Load().Len(sp.s.now()) }
