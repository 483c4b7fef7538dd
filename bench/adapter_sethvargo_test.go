package bench

// sethvargo/go-limiter: token bucket, memorystore (RWMutex map + per-bucket
// lock, background sweeper). It has no Redis store in this module (the
// separate go-redisstore module uses redigo), so it is in-memory only.

import (
	"context"
	"net/http"

	"github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
)

type sethvargoAdapter struct{ s limiter.Store }

func (a sethvargoAdapter) Allow(ctx context.Context, key string) (bool, error) {
	_, _, _, ok, err := a.s.Take(ctx, key)
	return ok, err
}

func (a sethvargoAdapter) Close() error { return a.s.Close(context.Background()) }

func newSethvargo(p Policy) (limiter.Store, error) {
	return memorystore.New(&memorystore.Config{Tokens: uint64(p.Limit), Interval: p.Window})
}

func init() {
	RegisterMemory(MemoryPeer{
		Name: "sethvargo", Rank: RankPeer,
		Note: "sethvargo/go-limiter memorystore",
		New: func(p Policy) (Limiter, error) {
			s, err := newSethvargo(p)
			return sethvargoAdapter{s}, err
		},
	})
	RegisterHTTP(HTTPPeer{
		Name: "sethvargo-mem", Rank: RankPeer,
		Note: "httplimit middleware, memorystore",
		New: func(_ *RedisEnv, p Policy) (func(http.Handler) http.Handler, error) {
			s, err := newSethvargo(p)
			if err != nil {
				return nil, err
			}
			m, err := httplimit.NewMiddleware(s, httplimit.IPKeyFunc())
			if err != nil {
				return nil, err
			}
			return m.Handle, nil
		},
	})
}
