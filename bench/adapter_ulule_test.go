package bench

// ulule/limiter/v3: fixed window counter; memory store (go-cache fork) and
// Redis store (EVALSHA of an INCRBY+PEXPIRE/PTTL script).

import (
	"context"
	"net/http"

	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	"github.com/ulule/limiter/v3/drivers/store/memory"
	sredis "github.com/ulule/limiter/v3/drivers/store/redis"
)

type ululeAdapter struct{ l *limiter.Limiter }

func (a ululeAdapter) Allow(ctx context.Context, key string) (bool, error) {
	c, err := a.l.Get(ctx, key)
	if err != nil {
		return false, err
	}
	return !c.Reached, nil
}

func ululeRate(p Policy) limiter.Rate { return limiter.Rate{Period: p.Window, Limit: p.Limit} }

func newUluleMem(p Policy) *limiter.Limiter {
	return limiter.New(memory.NewStoreWithOptions(limiter.StoreOptions{
		Prefix:          "ulule",
		CleanUpInterval: limiter.DefaultCleanUpInterval,
	}), ululeRate(p))
}

func newUluleRedis(env *RedisEnv, p Policy) (*limiter.Limiter, error) {
	st, err := sredis.NewStoreWithOptions(env.NewClient(), limiter.StoreOptions{Prefix: "ulule"})
	if err != nil {
		return nil, err
	}
	return limiter.New(st, ululeRate(p)), nil
}

func init() {
	RegisterMemory(MemoryPeer{
		Name: "ulule", Rank: RankPeer,
		Note: "ulule/limiter/v3 memory store",
		New:  func(p Policy) (Limiter, error) { return ululeAdapter{newUluleMem(p)}, nil },
	})
	RegisterRedis(RedisPeer{
		Name: "ulule-redis", Rank: RankPeer,
		Note: "ulule/limiter/v3 redis store (EVALSHA incr script)",
		New: func(env *RedisEnv, p Policy) (Limiter, error) {
			l, err := newUluleRedis(env, p)
			if err != nil {
				return nil, err
			}
			return ululeAdapter{l}, nil
		},
	})
	RegisterHTTP(HTTPPeer{
		Name: "ulule-mem", Rank: RankPeer,
		Note: "ulule stdlib middleware, memory store",
		New: func(_ *RedisEnv, p Policy) (func(http.Handler) http.Handler, error) {
			return stdlib.NewMiddleware(newUluleMem(p)).Handler, nil
		},
	})
	RegisterHTTP(HTTPPeer{
		Name: "ulule-redis", Rank: RankPeer, NeedsRedis: true,
		Note: "ulule stdlib middleware, redis store",
		New: func(env *RedisEnv, p Policy) (func(http.Handler) http.Handler, error) {
			l, err := newUluleRedis(env, p)
			if err != nil {
				return nil, err
			}
			return stdlib.NewMiddleware(l).Handler, nil
		},
	})
}
