package bench

// go-chi/httprate (sliding window counter). The in-memory peer is httprate's
// local LimitCounter, the Redis peer is go-chi/httprate-redis's LimitCounter;
// both are driven through RateLimiter.OnLimit, httprate's public non-HTTP
// entry point, which is exactly what its middleware calls per request
// (including its limiter-wide mutex around Get+Increment). Response headers
// are switched off in the Allow adapter (they are on in the HTTP test).

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/go-chi/httprate"
	httprateredis "github.com/go-chi/httprate-redis"
)

type nopWriter struct{}

func (nopWriter) Header() http.Header         { return http.Header{} }
func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriter) WriteHeader(int)             {}

type httprateAdapter struct {
	rl      *httprate.RateLimiter
	req     *http.Request
	errs    atomic.Int64
	lastErr atomic.Pointer[error]
}

func newHttprate(p Policy, opts ...httprate.Option) *httprateAdapter {
	a := &httprateAdapter{req: httptest.NewRequest(http.MethodGet, "/", nil)}
	opts = append(opts,
		httprate.WithResponseHeaders(httprate.ResponseHeaders{}),
		httprate.WithErrorHandler(func(_ http.ResponseWriter, _ *http.Request, err error) {
			a.lastErr.Store(&err)
			a.errs.Add(1)
		}),
	)
	a.rl = httprate.NewRateLimiter(int(p.Limit), p.Window, opts...)
	return a
}

func (a *httprateAdapter) Allow(_ context.Context, key string) (bool, error) {
	before := a.errs.Load()
	limited := a.rl.OnLimit(nopWriter{}, a.req, key)
	if limited && a.errs.Load() != before {
		return false, *a.lastErr.Load()
	}
	return !limited, nil
}

func httprateKey(r *http.Request) (string, error) { return ClientIP(r), nil }

func newHttprateRedisCounter(env *RedisEnv) httprate.LimitCounter {
	return httprateredis.NewCounter(&httprateredis.Config{
		Client:           env.NewClient(),
		PrefixKey:        "httprate",
		FallbackDisabled: true, // otherwise slow Redis silently becomes in-memory
	})
}

func init() {
	RegisterMemory(MemoryPeer{
		Name: "httprate", Rank: RankPeer,
		Note: "go-chi/httprate local counter via RateLimiter.OnLimit",
		New:  func(p Policy) (Limiter, error) { return newHttprate(p), nil },
	})
	RegisterRedis(RedisPeer{
		Name: "httprate-redis", Rank: RankPeer,
		Note: "go-chi/httprate-redis counter (MGET, then MULTI INCRBY EXPIRE EXEC) via OnLimit",
		New: func(env *RedisEnv, p Policy) (Limiter, error) {
			return newHttprate(p, httprate.WithLimitCounter(newHttprateRedisCounter(env))), nil
		},
	})
	RegisterHTTP(HTTPPeer{
		Name: "httprate-mem", Rank: RankPeer,
		Note: "httprate.LimitBy, in-memory counter",
		New: func(_ *RedisEnv, p Policy) (func(http.Handler) http.Handler, error) {
			return httprate.LimitBy(int(p.Limit), p.Window, httprateKey), nil
		},
	})
	RegisterHTTP(HTTPPeer{
		Name: "httprate-redis", Rank: RankPeer, NeedsRedis: true,
		Note: "httprate.LimitBy + httprate-redis counter",
		New: func(env *RedisEnv, p Policy) (func(http.Handler) http.Handler, error) {
			return httprate.LimitBy(int(p.Limit), p.Window, httprateKey,
				httprate.WithLimitCounter(newHttprateRedisCounter(env))), nil
		},
	})
}
