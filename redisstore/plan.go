package redisstore

import (
	"context"
	"errors"
	"fmt"

	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/httpprotect/protect/store"
	"github.com/redis/go-redis/v9"
)

// planArgs are a plan's script arguments, made once per plan and store:
// a request of cost 0 or 1 then boxes nothing.
type planArgs struct {
	plan   *store.Plan
	limits []store.PlanLimit // as the plan completed them
	base   [2][]any          // for cost 0 and 1, without a stream
	// stream: the arguments with a space's stream limits, for the space
	// that used the plan last (a protector with Config.Plan uses one plan
	// in one space, so they are made once).
	stream atomic.Pointer[streamArgs]
}

type streamArgs struct {
	limits string
	args   [2][]any // for cost 0 and 1
}

// planArgs returns the arguments of plan, made on its first use.
//
// The cache is bounded: a service may make a plan per customer, or per
// request from a database row, and a plan the cache holds cannot be
// collected. Past maxPlanArgs plans it starts afresh; a plan used again
// is prepared again, which costs a few allocations, once.
func (s *Store) planArgs(plan *store.Plan) *planArgs {
	if pa, ok := s.plans.Load(plan); ok {
		return pa.(*planArgs)
	}
	pa := &planArgs{plan: plan, limits: plan.Limits()}
	for c := range pa.base {
		pa.base[c] = pa.script(int64(c), "")
	}
	if s.planCount.Add(1) > maxPlanArgs {
		s.plans.Clear()
		s.planCount.Store(1)
	}
	v, loaded := s.plans.LoadOrStore(plan, pa)
	if loaded {
		s.planCount.Add(-1)
	}
	return v.(*planArgs)
}

// maxPlanArgs bounds the plans whose arguments a Store keeps.
const maxPlanArgs = 1024

// args returns the plan script's arguments for cost, with the stream
// limits stream ("" for none). Costs 0 and 1 reuse arguments made once;
// other costs make their own.
func (pa *planArgs) args(cost int64, stream string) []any {
	if cost > 1 {
		return pa.script(cost, stream)
	}
	if stream == "" {
		return pa.base[cost]
	}
	if sa := pa.stream.Load(); sa != nil && sa.limits == stream {
		return sa.args[cost]
	}
	sa := &streamArgs{limits: stream}
	for c := range sa.args {
		sa.args[c] = pa.script(int64(c), stream)
	}
	pa.stream.Store(sa)
	return sa.args[cost]
}

// script returns lua/plan.lua's arguments for cost, with the stream
// limits stream ("" for none): the cost, the stream, and seven per limit,
// each boxed here so that arguments made once cost a request nothing. A
// rate's integers are those the memory store computes (store/gcra.go).
func (pa *planArgs) script(cost int64, stream string) []any {
	args := make([]any, 0, 2+7*len(pa.limits))
	args = append(args, cost, stream)
	for _, pl := range pa.limits {
		switch l := pl.(type) {
		case store.Quota:
			args = append(args, "q", l.Name, strconv.FormatInt(l.Limit, 10), quotaCode(l.Period), "0", "0", "0")
		case store.Rate:
			period := l.Period.Microseconds()
			tq, tr, _ := store.GCRASplit(l.Burst, period, l.Limit, math.MaxInt64)
			iq, ir := "n", "n"
			if c := max(cost, 1); c <= l.Burst {
				q, r, _ := store.GCRASplit(c, period, l.Limit, math.MaxInt64)
				iq, ir = strconv.FormatInt(q, 10), strconv.FormatInt(r, 10)
			}
			args = append(args, "r", l.Name, strconv.FormatInt(l.Limit, 10), strconv.FormatInt(tq, 10), strconv.FormatInt(tr, 10), iq, ir)
		}
	}
	return args
}

// quotaCode names a quota's calendar window to lua/plan.lua.
func quotaCode(p store.QuotaPeriod) string {
	switch p {
	case store.Hourly:
		return "h"
	case store.Daily:
		return "d"
	}
	return "m"
}

// TakePlan implements Space: one round trip of lua/plan.lua, or none when
// a range ban or a cached ban answers.
func (sp *redisSpace) TakePlan(ctx context.Context, k store.Key, addr netip.Addr, plan *store.Plan, cost int64, stream bool) (store.PlanResult, error) {
	if err := store.CheckTakePlan(k, plan, cost); err != nil {
		return store.PlanResult{}, err
	}
	if err := checkRedisKey(k); err != nil {
		return store.PlanResult{}, err
	}
	s := sp.s
	t := s.now()
	if err := s.ready(ctx, sp.bns); err != nil {
		return store.PlanResult{}, err
	}
	if al := sp.bns.allows.Load(); al != nil && lookupAllow(al, addr, t) {
		return store.PlanResult{Result: store.Result{Allowed: true}, Decider: -1}, nil
	}
	if r, banned := rangeBanned(sp.bns.ranges.Load(), addr, t); banned {
		return store.PlanResult{Result: r, Decider: -1}, nil
	}
	if r, ok := s.bans.lookup(sp.bns, k, t); ok {
		return store.PlanResult{Result: r, Decider: -1}, nil
	}
	var limits string
	if stream {
		limits = sp.args[1][1].(string) // the take script's limits: the same stream
	}
	pa := s.planArgs(plan)
	args := pa.args(cost, limits)
	dmg := s.damage.damaged(sp.bns, k)
	if dmg != nil {
		args = append(slices.Clone(args), dmg.sha) // see damage.go; args are shared
	}
	for try := 0; ; try++ {
		v, err := planScript.Run(ctx, s.counting(), sp.scriptKeys(k), args...).Result()
		if err != nil {
			return store.PlanResult{}, fmt.Errorf("protect: redis plan %s: %w", k, err)
		}
		var res store.PlanResult
		ignored, err := decodePlan(v, k, plan, len(pa.limits), cost, &res)
		var bad *badRecord
		switch {
		case errors.As(err, &bad):
			_, bk, _ := redisKeys(sp.ns, sp.bns.name, k)
			dmg = s.damage.remember(sp.bns, k, bk, bad.rec, bad.err)
			if try == 0 {
				s.indexDamage(ctx, sp.bns, k)
			}
			if try == 2 {
				return store.PlanResult{Decider: -1}, dmg.err
			}
			args = append(slices.Clone(pa.args(cost, limits)), dmg.sha)
			continue
		case err != nil:
			return store.PlanResult{}, fmt.Errorf("protect: redis plan %s: %w", k, err)
		}
		if !stream {
			res.Count = 0
		}
		switch {
		case ignored:
			s.bans.seenUnbanned(sp.bns, k, t)
			return res, dmg.err
		case dmg != nil:
			s.damage.forget(sp.bns, k)
		}
		if res.Banned() {
			s.bans.remember(sp.bns, k, res.Result, t)
		} else {
			s.bans.seenUnbanned(sp.bns, k, t)
		}
		return res, nil
	}
}

// planUsage reads the plan states of k: its keys are found with one SCAN
// of the node that holds k's slot (the pattern names k's hash tag), and
// read in one pipelined round trip. It is for operators, not requests.
func (sp *redisSpace) planUsage(ctx context.Context, k store.Key) ([]store.LimitUsage, error) {
	s := sp.s
	base := redisBase(sp.ns, k)
	pattern := globEscape(base) + ":[rq]:*"
	var node redis.Cmdable = s.client
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, base)
		if err != nil {
			return nil, fmt.Errorf("protect: redis inspect %s: %w", k, err)
		}
		node = m
	}
	var keys []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		return iter.Err()
	}
	var err error
	if ring, ok := s.client.(*redis.Ring); ok {
		err = ring.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, node)
	}
	if err != nil {
		return nil, fmt.Errorf("protect: redis inspect %s: %w", k, err)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	var gets []*redis.StringCmd
	var ttls []*redis.DurationCmd
	_, err = node.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, key := range keys {
			gets = append(gets, p.Get(ctx, key))
			ttls = append(ttls, p.PTTL(ctx, key))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("protect: redis inspect %s: %w", k, err)
	}
	var out []store.LimitUsage
	for i, key := range keys {
		v, err1 := gets[i].Result()
		ttl, err2 := ttls[i].Result()
		if err1 != nil || err2 != nil || ttl <= 0 {
			continue // expired between SCAN and GET
		}
		u, err := decodeUsage(strings.TrimPrefix(key, base), v, ttl)
		if err != nil {
			s.log.Warn("protect: skipping a plan state", "key", key, "error", err)
			continue
		}
		out = append(out, u)
	}
	return out, nil
}

// decodeUsage reads one plan state: its key's suffix after the base
// (":r:<name>" or ":q:<name>:<window>"), its value and its time to live.
func decodeUsage(suffix, v string, ttl time.Duration) (store.LimitUsage, error) {
	kind, rest, _ := strings.Cut(strings.TrimPrefix(suffix, ":"), ":")
	switch kind {
	case "r":
		tat, rem, ok := strings.Cut(v, "|")
		if _, err := strconv.ParseInt(tat, 10, 64); !ok || err != nil {
			return store.LimitUsage{}, fmt.Errorf("malformed rate state %q", v)
		}
		if _, err := strconv.ParseInt(rem, 10, 64); err != nil {
			return store.LimitUsage{}, fmt.Errorf("malformed rate state %q", v)
		}
		// The key expires when the bucket is full: its TTL is the backlog.
		return store.LimitUsage{Name: rest, Reset: ttl}, checkLimitName(rest)
	case "q":
		name, window, _ := strings.Cut(rest, ":")
		used, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return store.LimitUsage{}, fmt.Errorf("malformed quota count %q", v)
		}
		u := store.LimitUsage{Name: name, Window: window, Used: used, Reset: ttl}
		switch len(window) {
		case len("2006-01-02T15"):
			u.Period = store.Hourly
		case len("2006-01-02"):
			u.Period = store.Daily
		case len("2006-01"):
			u.Period = store.Monthly
		default:
			return store.LimitUsage{}, fmt.Errorf("malformed quota window %q", window)
		}
		return u, checkLimitName(name)
	}
	return store.LimitUsage{}, fmt.Errorf("not a plan state: %q", suffix)
}

// checkLimitName refuses a name no plan can hold, as NewPlan judges it:
// a key that holds one was not written by protect.
func checkLimitName(name string) error {
	if !validLimitName(name) {
		return fmt.Errorf("not a limit name: %q", name)
	}
	return nil
}

func validLimitName(name string) bool {
	if name == "" { // NewPlan would name it
		return false
	}
	_, err := store.NewPlan("name", store.Quota{Name: name, Limit: 1, Period: store.Daily})
	return err == nil
}
