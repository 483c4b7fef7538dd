package bench

// Redis baselines and go-redis/redis_rate.
//   ping        physical floor: one PING, one round trip, limits nothing
//   naive-incr  fixed window: INCR + EXPIRE in one pipeline (1 round trip)
//   redis_rate  go-redis/redis_rate/v10 GCRA Lua script (EVALSHA)

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

type pingAdapter struct{ rdb *redis.Client }

func (a pingAdapter) Allow(ctx context.Context, _ string) (bool, error) {
	return true, a.rdb.Ping(ctx).Err()
}

type naiveIncr struct {
	rdb    *redis.Client
	limit  int64
	window time.Duration
}

func (a naiveIncr) Allow(ctx context.Context, key string) (bool, error) {
	win := time.Now().UnixNano() / int64(a.window)
	k := "naive:" + key + ":" + strconv.FormatInt(win, 10)
	var incr *redis.IntCmd
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		incr = p.Incr(ctx, k)
		p.Expire(ctx, k, a.window)
		return nil
	})
	if err != nil {
		return false, err
	}
	return incr.Val() <= a.limit, nil
}

type redisRateAdapter struct {
	l     *redis_rate.Limiter
	limit redis_rate.Limit
}

func (a redisRateAdapter) Allow(ctx context.Context, key string) (bool, error) {
	res, err := a.l.Allow(ctx, key, a.limit)
	if err != nil {
		return false, err
	}
	return res.Allowed > 0, nil
}

func newRedisRate(env *RedisEnv, p Policy) redisRateAdapter {
	return redisRateAdapter{
		l:     redis_rate.NewLimiter(env.NewClient()),
		limit: redis_rate.Limit{Rate: int(p.Limit), Burst: int(p.Limit), Period: p.Window},
	}
}

func init() {
	RegisterRedis(RedisPeer{
		Name: "ping", Rank: RankBaseline, NoEnforce: true,
		Note: "PING: one round trip, the floor",
		New: func(env *RedisEnv, _ Policy) (Limiter, error) {
			return pingAdapter{env.NewClient()}, nil
		},
	})
	RegisterRedis(RedisPeer{
		Name: "naive-incr", Rank: RankBaseline,
		Note: "INCR+EXPIRE pipeline, fixed window",
		New: func(env *RedisEnv, p Policy) (Limiter, error) {
			return naiveIncr{rdb: env.NewClient(), limit: p.Limit, window: p.Window}, nil
		},
	})
	RegisterRedis(RedisPeer{
		Name: "redis_rate", Rank: RankPeer,
		Note: "go-redis/redis_rate/v10 GCRA (EVALSHA)",
		New: func(env *RedisEnv, p Policy) (Limiter, error) {
			return newRedisRate(env, p), nil
		},
	})
	RegisterHTTP(HTTPPeer{
		Name: "none", Rank: RankBaseline, NoEnforce: true,
		Note: "no middleware",
		New: func(_ *RedisEnv, _ Policy) (func(http.Handler) http.Handler, error) {
			return func(h http.Handler) http.Handler { return h }, nil
		},
	})
	RegisterHTTP(HTTPPeer{
		Name: "ping", Rank: RankBaseline, NeedsRedis: true, NoEnforce: true,
		Note: "LimiterMiddleware(PING): one Redis round trip per request",
		New: func(env *RedisEnv, _ Policy) (func(http.Handler) http.Handler, error) {
			return LimiterMiddleware(pingAdapter{env.NewClient()}), nil
		},
	})
	RegisterHTTP(HTTPPeer{
		Name: "naive-incr", Rank: RankBaseline, NeedsRedis: true,
		Note: "LimiterMiddleware(INCR+EXPIRE pipeline)",
		New: func(env *RedisEnv, p Policy) (func(http.Handler) http.Handler, error) {
			return LimiterMiddleware(naiveIncr{rdb: env.NewClient(), limit: p.Limit, window: p.Window}), nil
		},
	})
	RegisterHTTP(HTTPPeer{
		Name: "redis_rate", Rank: RankPeer, NeedsRedis: true,
		Note: "no middleware in redis_rate: harness LimiterMiddleware",
		New: func(env *RedisEnv, p Policy) (func(http.Handler) http.Handler, error) {
			return LimiterMiddleware(newRedisRate(env, p)), nil
		},
	})
}
