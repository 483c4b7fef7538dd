package bench

// The project plugged into the harness: in-memory and Redis stores, and its
// own middleware. Bans are disabled (BanLimit -1) so that the clean path is
// measured, as for every peer.

import (
	"context"
	"errors"
	"net/http"
	"net/netip"

	protect "github.com/httpprotect/protect"
)

// projectAdapter is every in-memory and Redis peer of the project, so
// that two of them differ only in their configuration (project-mem-lists
// is project-mem with a list), never in the code the harness calls.
type projectAdapter struct {
	p    *protect.Protector
	done func() error // what Close does after closing p; nil for nothing
}

func (a *projectAdapter) Allow(ctx context.Context, key string) (bool, error) {
	addr, err := netip.ParseAddr(key)
	if err != nil {
		return false, err
	}
	d, err := a.p.VerifyAddr(ctx, addr)
	if err != nil {
		return false, err
	}
	return !d.Refused(), nil
}

func (a *projectAdapter) Close() error {
	err := a.p.Close()
	if a.done != nil {
		err = errors.Join(err, a.done())
	}
	return err
}

func projectConfig(p Policy) protect.Config {
	return protect.Config{TTL: p.Window, MaxRequests: int64(p.Limit), BanLimit: -1, OnStoreError: protect.FailOpen}
}

func newProjectMem(p Policy) (*projectAdapter, error) {
	pr, err := protect.New(projectConfig(p))
	return &projectAdapter{p: pr}, err
}

func newProjectRedis(env *RedisEnv, p Policy) (*projectAdapter, error) {
	cfg := projectConfig(p)
	cfg.Store = projectRedisStore(env)
	pr, err := protect.New(cfg)
	return &projectAdapter{p: pr}, err
}

func init() {
	RegisterMemory(MemoryPeer{Name: "project-mem", Rank: RankProject, Note: "protect, in-memory store",
		New: func(p Policy) (Limiter, error) { return newProjectMem(p) }})
	RegisterRedis(RedisPeer{Name: "project-redis", Rank: RankProject, Note: "protect, Redis store",
		New: func(env *RedisEnv, p Policy) (Limiter, error) { return newProjectRedis(env, p) }})
	RegisterHTTP(HTTPPeer{Name: "project-mem", Rank: RankProject, Note: "protect middleware, in-memory store",
		New: func(_ *RedisEnv, p Policy) (func(http.Handler) http.Handler, error) {
			a, err := newProjectMem(p)
			if err != nil {
				return nil, err
			}
			return a.p.Middleware, nil
		}})
	RegisterHTTP(HTTPPeer{Name: "project-redis", Rank: RankProject, NeedsRedis: true, Note: "protect middleware, Redis store",
		New: func(env *RedisEnv, p Policy) (func(http.Handler) http.Handler, error) {
			a, err := newProjectRedis(env, p)
			if err != nil {
				return nil, err
			}
			return a.p.Middleware, nil
		}})
}
