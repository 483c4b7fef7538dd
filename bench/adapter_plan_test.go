package bench

// protect's consumer plans, measured as a GCRA peer: one Rate with burst =
// Limit and Limit per Window, as every token-bucket peer here is configured.

import (
	"context"

	protect "github.com/httpprotect/protect"
)

type planAdapter struct {
	p    *protect.Protector
	plan *protect.Plan
}

func (a *planAdapter) Allow(ctx context.Context, key string) (bool, error) {
	d, err := a.p.VerifyConsumer(ctx, key, a.plan)
	if err != nil {
		return false, err
	}
	return !d.Refused(), nil
}

func (a *planAdapter) Close() error { return a.p.Close() }

func newPlanAdapter(store protect.Store, p Policy) (*planAdapter, error) {
	plan, err := protect.NewPlan("bench", protect.Rate{Name: "rate", Limit: p.Limit, Period: p.Window, Burst: p.Limit})
	if err != nil {
		return nil, err
	}
	pr, err := protect.New(protect.Config{Store: store, BanLimit: -1, OnStoreError: protect.FailOpen})
	if err != nil {
		return nil, err
	}
	return &planAdapter{p: pr, plan: plan}, nil
}

func init() {
	RegisterMemory(MemoryPeer{Name: "project-plan", Rank: RankProject, Note: "protect VerifyConsumer, one Rate, in-memory store",
		New: func(p Policy) (Limiter, error) { return newPlanAdapter(nil, p) }})
	RegisterRedis(RedisPeer{Name: "project-plan-redis", Rank: RankProject, Note: "protect VerifyConsumer, one Rate, Redis store",
		New: func(env *RedisEnv, p Policy) (Limiter, error) {
			return newPlanAdapter(projectRedisStore(env), p)
		}})
}
