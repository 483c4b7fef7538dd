package protect

import (
	"context"
	"fmt"
	"math"
	"net/netip"

	"github.com/httpprotect/protect/store"
)

// Consumers under plans: VerifyConsumer and Config.ConsumerFunc hold an
// authenticated consumer to its plan, and Config.Plan holds every address
// (or KeyFunc key) of a protector to one. Both go through Space.TakePlan,
// on every store alike.

var errNoConsumer = fmt.Errorf("%w: empty consumer", ErrUnknownClient)

// ErrNoPlan is the error of the Unknown decision for a consumer that came
// with no plan (ConsumerFunc's plan nil, or a plan name a gateway sent
// that nobody configured): never unlimited. It wraps ErrUnknownClient.
var ErrNoPlan = fmt.Errorf("%w: consumer has no plan", ErrUnknownClient)

// VerifyConsumer decides one request of an authenticated consumer under
// its plan, in this order: an empty consumer is Unknown; a ban on
// consumer:NAME (or on a range holding the client address, through
// ConsumerFunc) is Banned; a rate of the plan that refuses makes it
// Limited (code rate_limited, Retry-After when one request fits), a quota
// that refuses Exhausted (code quota_exceeded, Retry-After when its
// window ends); otherwise it is Allowed. It is charged to every limit of
// the plan only when every limit admits it: a refused request costs
// nothing, so a client that waits its Retry-After is served at once.
// Decision.Policy names the limit that decided.
//
// Consumers are limited, never banned automatically: a paying customer
// that hammers is refused, and an operator may still ban consumer:NAME.
// The consumer is stored under ConsumerKey(consumer), so a secret is
// hashed. A nil plan is Unknown: a consumer whose plan cannot be found is
// never unlimited. The error result is non-nil only when ctx ended, as
// for Verify.
func (p *Protector) VerifyConsumer(ctx context.Context, consumer string, plan *Plan) (Decision, error) {
	// Inlined (TestInlining), so that a decision is copied once, into
	// the caller's variable, rather than out of this call's frame too.
	var d Decision
	err := p.verifyConsumer(ctx, &d, consumer, plan, 1)
	return d, err
}

// verifyConsumer is VerifyConsumerN, writing the decision into d, which
// must be zero, and counting it.
func (p *Protector) verifyConsumer(ctx context.Context, d *Decision, consumer string, plan *Plan, cost int64) (err error) {
	if consumer == "" || plan == nil || plan.Len() == 0 || cost < 0 {
		*d, err = p.badConsumer(consumer, plan, netip.Addr{}, cost)
	} else {
		err = p.decidePlan(ctx, d, p.consumerKeys.Key(consumer), netip.Addr{}, plan, cost, false)
	}
	p.decided(d)
	return err
}

// VerifyConsumerN is VerifyConsumer for a request that costs cost units
// of every limit of the plan (a batch of cost calls, say). A cost that
// does not fit is refused and charges nothing; one above what a limit can
// ever hold (a Rate's Burst, a Quota's Limit) is refused without a
// Retry-After, and Decision.Err wraps ErrCostTooHigh. Cost 0 decides
// whether a request of cost 1 would be served, and writes nothing. A
// negative cost is a programming error: the Decision is Unavailable and
// the error says so.
func (p *Protector) VerifyConsumerN(ctx context.Context, consumer string, plan *Plan, cost int64) (Decision, error) {
	var d Decision
	err := p.verifyConsumer(ctx, &d, consumer, plan, cost)
	return d, err
}

// consumer holds consumer id, from client address a, to plan: what
// ConsumerFunc resolved for a request.
func (p *Protector) consumer(ctx context.Context, id string, plan *Plan, a netip.Addr, cost int64) (d Decision, err error) {
	if id == "" || plan == nil || plan.Len() == 0 || cost < 0 {
		return p.badConsumer(id, plan, a, cost)
	}
	err = p.decidePlan(ctx, &d, p.consumerKeys.Key(id), a, plan, cost, false)
	return d, err
}

// badConsumer decides what VerifyConsumerN cannot hold to a plan: no
// consumer, no plan (a Plan not made by NewPlan is none), a negative
// cost. It is out of line, so that the hot path's frame holds one
// Decision.
//
//go:noinline
func (p *Protector) badConsumer(id string, plan *Plan, a netip.Addr, cost int64) (Decision, error) {
	if id == "" {
		d := p.unknown(errNoConsumer)
		d.Addr = a
		return d, nil
	}
	k := p.consumerKeys.Key(id)
	if plan == nil || plan.Len() == 0 {
		d := p.unknown(fmt.Errorf("%w: %s", ErrNoPlan, k))
		d.Addr, d.Key = a, k
		return d, nil
	}
	err := fmt.Errorf("protect: consumer %s: cost %d: must not be negative", k, cost)
	return Decision{Status: Unavailable, Addr: a, Key: k, DryRun: p.cfg.DryRun, Err: err}, err
}

// decidePlan decides key k under plan, charging cost, through the store
// and the failure policy, and writes the answer into d, which must be
// zero. With stream (Config.Plan) the stream counter counts beside the
// plan, for BanLimit. The error is non-nil only when ctx ended.
func (p *Protector) decidePlan(ctx context.Context, d *Decision, k Key, a netip.Addr, plan *Plan, cost int64, stream bool) error {
	res, err := p.space.TakePlan(ctx, k, a, plan, cost, stream)
	if err != nil {
		return p.takePlanFailed(ctx, d, k, a, plan, cost, stream, err)
	}
	p.planDecision(ctx, d, k, a, plan, cost, stream, &res)
	return nil
}

// planDecision writes the store's answer res into d.
func (p *Protector) planDecision(ctx context.Context, d *Decision, k Key, a netip.Addr, plan *Plan, cost int64, stream bool, res *store.PlanResult) {
	d.Addr, d.Key = a, k
	if res.Allowed {
		d.Status = Safe
		return
	}
	d.DryRun, d.hdr = p.cfg.DryRun, p.planFields.of(plan)
	if stream {
		d.Count = res.Count
	}
	switch {
	case res.Banned():
		p.banned(ctx, d, &res.Result)
	case stream && p.cfg.DryRun && p.lim.BanLimit >= 0 && res.Count > p.lim.BanLimit:
		p.wouldBan(ctx, d, cost)
	default:
		p.fillPlan(d, plan, res, cost)
	}
	if p.cfg.DryRun && cost > 0 { // a Check refuses nothing it could log
		p.logDryRun(d)
	}
}

// fillPlan writes a plan's answer into d: the deciding limit's numbers,
// and each limit's r and t for the RateLimit field.
func (p *Protector) fillPlan(d *Decision, plan *Plan, res *store.PlanResult, cost int64) {
	for j := range plan.Len() {
		st := &res.Limits[j]
		t := st.Reset
		if st.RetryAfter > 0 {
			t = st.RetryAfter
		}
		d.planLeft[j] = uint32(min(max(st.Remaining, 0), maxPlanLeft))
		d.planReset[j] = uint32(min(seconds(t), math.MaxUint32))
	}
	i := res.Decider
	if i < 0 || i >= plan.Len() { // a store of someone else's that got it wrong
		i = 0
	}
	l, st := plan.Spec(i), &res.Limits[i]
	d.Policy, d.Limit, d.Remaining, d.Window = l.Name, l.Limit, st.Remaining, l.Window
	if !st.Refused() {
		return
	}
	d.Status = Limited
	if l.Quota != 0 {
		d.Status = Exhausted
	}
	if st.RetryAfter > 0 {
		d.RetryAfter = st.RetryAfter
		return
	}
	d.Err = fmt.Errorf("%w: %s: cost %d, but limit %q of plan %q holds %d", ErrCostTooHigh, d.Key, cost, l.Name, plan.Name(), l.Capacity)
}
