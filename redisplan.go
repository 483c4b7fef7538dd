package protect

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/plan.lua
	planLua string
	// planScript is shared by every RedisStore: a Script is its source
	// and hash, nothing more.
	planScript = redis.NewScript(planLua)
)

// planStreamArgs are a plan's script arguments with a space's stream
// limits, kept on the plan for the space that used it last: a protector
// with Config.Plan uses one plan in one space, so they are made once.
type planStreamArgs struct {
	limits string
	args   [2][]any // for cost 0 and 1
}

// redisArgsFor returns the plan script's arguments for cost, with the
// stream limits stream ("" for none). Costs 0 and 1 reuse arguments made
// once; other costs make their own.
func (p *Plan) redisArgsFor(cost int64, stream string) []any {
	if cost > 1 {
		return p.scriptArgs(cost, stream)
	}
	if stream == "" {
		return p.redisArgs[cost]
	}
	if sa := p.streamArgs.Load(); sa != nil && sa.limits == stream {
		return sa.args[cost]
	}
	sa := &planStreamArgs{limits: stream}
	for c := range sa.args {
		sa.args[c] = p.scriptArgs(int64(c), stream)
	}
	p.streamArgs.Store(sa)
	return sa.args[cost]
}

// TakePlan implements Space: one round trip of lua/plan.lua, or none when
// a range ban or a cached ban answers.
func (sp *redisSpace) TakePlan(ctx context.Context, k Key, addr netip.Addr, plan *Plan, cost int64, stream bool) (PlanResult, error) {
	if err := checkTakePlan(k, plan, cost); err != nil {
		return PlanResult{}, err
	}
	if err := checkRedisKey(k); err != nil {
		return PlanResult{}, err
	}
	s := sp.s
	t := s.now()
	if err := s.ready(ctx, sp.bns); err != nil {
		return PlanResult{}, err
	}
	if r, banned := sp.bns.ranges.Load().banned(addr, t); banned {
		return PlanResult{Result: r, Decider: -1}, nil
	}
	if r, ok := s.lookupBan(sp.bns, k, t); ok {
		return PlanResult{Result: r, Decider: -1}, nil
	}
	var limits string
	if stream {
		limits = sp.args[1][1].(string) // the take script's limits: the same stream
	}
	v, err := planScript.Run(ctx, s.client, sp.scriptKeys(k), plan.redisArgsFor(cost, limits)...).Result()
	if err != nil {
		return PlanResult{}, fmt.Errorf("protect: redis plan %s: %w", k, err)
	}
	var res PlanResult
	if err := decodePlan(v, k, plan, cost, &res); err != nil {
		return PlanResult{}, fmt.Errorf("protect: redis plan %s: %w", k, err)
	}
	if !stream {
		res.Count = 0
	}
	if res.Banned {
		s.remember(sp.bns, k, res.Result, t)
	}
	return res, nil
}

// planUsage reads the plan states of k: its keys are found with one SCAN
// of the node that holds k's slot (the pattern names k's hash tag), and
// read in one pipelined round trip. It is for operators, not requests.
func (sp *redisSpace) planUsage(ctx context.Context, k Key) ([]LimitUsage, error) {
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
	var out []LimitUsage
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
func decodeUsage(suffix, v string, ttl time.Duration) (LimitUsage, error) {
	kind, rest, _ := strings.Cut(strings.TrimPrefix(suffix, ":"), ":")
	switch kind {
	case "r":
		tat, rem, ok := strings.Cut(v, "|")
		if _, err := strconv.ParseInt(tat, 10, 64); !ok || err != nil {
			return LimitUsage{}, fmt.Errorf("malformed rate state %q", v)
		}
		if _, err := strconv.ParseInt(rem, 10, 64); err != nil {
			return LimitUsage{}, fmt.Errorf("malformed rate state %q", v)
		}
		// The key expires when the bucket is full: its TTL is the backlog.
		return LimitUsage{Name: rest, Reset: ttl}, checkLimitName(rest)
	case "q":
		name, window, _ := strings.Cut(rest, ":")
		used, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return LimitUsage{}, fmt.Errorf("malformed quota count %q", v)
		}
		u := LimitUsage{Name: name, Window: window, Used: used, Reset: ttl}
		switch len(window) {
		case len("2006-01-02T15"):
			u.Period = Hourly
		case len("2006-01-02"):
			u.Period = Daily
		case len("2006-01"):
			u.Period = Monthly
		default:
			return LimitUsage{}, fmt.Errorf("malformed quota window %q", window)
		}
		return u, checkLimitName(name)
	}
	return LimitUsage{}, fmt.Errorf("not a plan state: %q", suffix)
}
