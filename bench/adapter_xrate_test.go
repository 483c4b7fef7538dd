package bench

// golang.org/x/time/rate: one *rate.Limiter per key, kept in a map the way
// most hand-rolled per-IP limiters do it. x/time/rate ships no keyed store and
// no middleware; there is no eviction here either (real code adds a sweeper).

import (
	"context"
	"hash/maphash"
	"net/http"
	"sync"

	"golang.org/x/time/rate"
)

func xratePolicy(p Policy) (rate.Limit, int) {
	return rate.Limit(float64(p.Limit) / p.Window.Seconds()), int(p.Limit)
}

// xrateSyncMap: sync.Map[string]*rate.Limiter.
type xrateSyncMap struct {
	m     sync.Map
	lim   rate.Limit
	burst int
}

func newXrateSyncMap(p Policy) *xrateSyncMap {
	l, b := xratePolicy(p)
	return &xrateSyncMap{lim: l, burst: b}
}

func (x *xrateSyncMap) Allow(_ context.Context, key string) (bool, error) {
	if v, ok := x.m.Load(key); ok {
		return v.(*rate.Limiter).Allow(), nil
	}
	v, _ := x.m.LoadOrStore(key, rate.NewLimiter(x.lim, x.burst))
	return v.(*rate.Limiter).Allow(), nil
}

// xrateSharded: 64 shards of map[string]*rate.Limiter behind an RWMutex.
const xrateShardCount = 64

type xrateShard struct {
	mu sync.RWMutex
	m  map[string]*rate.Limiter
	_  [32]byte // keep shards on separate cache lines
}

type xrateSharded struct {
	seed   maphash.Seed
	shards [xrateShardCount]xrateShard
	lim    rate.Limit
	burst  int
}

func newXrateSharded(p Policy) *xrateSharded {
	l, b := xratePolicy(p)
	x := &xrateSharded{seed: maphash.MakeSeed(), lim: l, burst: b}
	for i := range x.shards {
		x.shards[i].m = make(map[string]*rate.Limiter)
	}
	return x
}

func (x *xrateSharded) Allow(_ context.Context, key string) (bool, error) {
	s := &x.shards[maphash.String(x.seed, key)%xrateShardCount]
	s.mu.RLock()
	l, ok := s.m[key]
	s.mu.RUnlock()
	if !ok {
		s.mu.Lock()
		if l, ok = s.m[key]; !ok {
			l = rate.NewLimiter(x.lim, x.burst)
			s.m[key] = l
		}
		s.mu.Unlock()
	}
	return l.Allow(), nil
}

func init() {
	RegisterMemory(MemoryPeer{
		Name: "xrate-syncmap", Rank: RankPeer,
		Note: "golang.org/x/time/rate, sync.Map of *rate.Limiter, no eviction",
		New:  func(p Policy) (Limiter, error) { return newXrateSyncMap(p), nil },
	})
	RegisterMemory(MemoryPeer{
		Name: "xrate-sharded", Rank: RankPeer,
		Note: "golang.org/x/time/rate, 64-shard RWMutex map, no eviction",
		New:  func(p Policy) (Limiter, error) { return newXrateSharded(p), nil },
	})
	RegisterHTTP(HTTPPeer{
		Name: "xrate-syncmap", Rank: RankPeer,
		Note: "no middleware in x/time/rate: harness LimiterMiddleware",
		New: func(_ *RedisEnv, p Policy) (func(http.Handler) http.Handler, error) {
			return LimiterMiddleware(newXrateSyncMap(p)), nil
		},
	})
}
