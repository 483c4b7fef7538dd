package bench

// throttled/throttled/v2: GCRA over a compare-and-swap store. memstore is
// configured with an LRU bound (the documented way; 2^21 keys so the 1M-key
// runs do not evict). The go-redis v9 store does GET+TIME in a pipeline, then
// SETNX+EXPIRE for a new key or EVAL of a CAS script for an existing one.

import (
	"context"
	"net/http"

	"github.com/throttled/throttled/v2"
	goredisstore "github.com/throttled/throttled/v2/store/goredisstore.v9"
	"github.com/throttled/throttled/v2/store/memstore"
)

const throttledMaxKeys = 1 << 21

type throttledAdapter struct{ rl *throttled.GCRARateLimiterCtx }

func (a throttledAdapter) Allow(ctx context.Context, key string) (bool, error) {
	limited, _, err := a.rl.RateLimitCtx(ctx, key, 1)
	if err != nil {
		return false, err
	}
	return !limited, nil
}

func throttledQuota(p Policy) throttled.RateQuota {
	return throttled.RateQuota{MaxRate: throttled.PerDuration(int(p.Limit), p.Window), MaxBurst: int(p.Limit) - 1}
}

func newThrottledMem(p Policy) (*throttled.GCRARateLimiterCtx, error) {
	st, err := memstore.NewCtx(throttledMaxKeys)
	if err != nil {
		return nil, err
	}
	return throttled.NewGCRARateLimiterCtx(st, throttledQuota(p))
}

func newThrottledRedis(env *RedisEnv, p Policy) (*throttled.GCRARateLimiterCtx, error) {
	st, err := goredisstore.NewCtx(env.NewClient(), "throttled:")
	if err != nil {
		return nil, err
	}
	return throttled.NewGCRARateLimiterCtx(st, throttledQuota(p))
}

func throttledHTTP(rl *throttled.GCRARateLimiterCtx) func(http.Handler) http.Handler {
	h := &throttled.HTTPRateLimiterCtx{RateLimiter: rl, VaryBy: &throttled.VaryBy{RemoteAddr: true}}
	return h.RateLimit
}

func init() {
	RegisterMemory(MemoryPeer{
		Name: "throttled", Rank: RankPeer,
		Note: "throttled/v2 GCRA, memstore with LRU(2^21)",
		New: func(p Policy) (Limiter, error) {
			rl, err := newThrottledMem(p)
			return throttledAdapter{rl}, err
		},
	})
	RegisterRedis(RedisPeer{
		Name: "throttled-redis", Rank: RankPeer,
		Note: "throttled/v2 GCRA, goredisstore.v9 (pipeline GET+TIME, then EVAL CAS)",
		New: func(env *RedisEnv, p Policy) (Limiter, error) {
			rl, err := newThrottledRedis(env, p)
			return throttledAdapter{rl}, err
		},
	})
	RegisterHTTP(HTTPPeer{
		Name: "throttled-mem", Rank: RankPeer,
		Note: "HTTPRateLimiterCtx, memstore",
		New: func(_ *RedisEnv, p Policy) (func(http.Handler) http.Handler, error) {
			rl, err := newThrottledMem(p)
			if err != nil {
				return nil, err
			}
			return throttledHTTP(rl), nil
		},
	})
	RegisterHTTP(HTTPPeer{
		Name: "throttled-redis", Rank: RankPeer, NeedsRedis: true,
		Note: "HTTPRateLimiterCtx, goredisstore.v9",
		New: func(env *RedisEnv, p Policy) (func(http.Handler) http.Handler, error) {
			rl, err := newThrottledRedis(env, p)
			if err != nil {
				return nil, err
			}
			return throttledHTTP(rl), nil
		},
	})
}
