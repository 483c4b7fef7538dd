package protect

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
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
func (p *Protector) VerifyConsumer(ctx context.Context, consumer string, plan *Plan) (d Decision, err error) {
	// VerifyConsumerN's body, not a call of it: a Decision is a few hundred
	// bytes, and each layer would copy it once more. Each return counts
	// the decision itself, as VerifyAddr's do.
	if consumer == "" || plan == nil || len(plan.limits) == 0 {
		d, err = p.badConsumer(consumer, plan, netip.Addr{}, 1)
		p.decided(&d)
		return d, err
	}
	err = p.decidePlan(ctx, &d, p.consumerKeys.key(consumer), netip.Addr{}, plan, 1, false)
	p.decided(&d)
	return d, err
}

// VerifyConsumerN is VerifyConsumer for a request that costs cost units
// of every limit of the plan (a batch of cost calls, say). A cost that
// does not fit is refused and charges nothing; one above what a limit can
// ever hold (a Rate's Burst, a Quota's Limit) is refused without a
// Retry-After, and Decision.Err wraps ErrCostTooHigh. Cost 0 decides
// whether a request of cost 1 would be served, and writes nothing. A
// negative cost is a programming error: the Decision is Unavailable and
// the error says so.
func (p *Protector) VerifyConsumerN(ctx context.Context, consumer string, plan *Plan, cost int64) (d Decision, err error) {
	// Each return counts the decision itself, as VerifyAddr's do.
	if consumer == "" || plan == nil || len(plan.limits) == 0 || cost < 0 {
		d, err = p.badConsumer(consumer, plan, netip.Addr{}, cost)
		p.decided(&d)
		return d, err
	}
	err = p.decidePlan(ctx, &d, p.consumerKeys.key(consumer), netip.Addr{}, plan, cost, false)
	p.decided(&d)
	return d, err
}

// consumer holds consumer id, from client address a, to plan: what
// ConsumerFunc resolved for a request.
func (p *Protector) consumer(ctx context.Context, id string, plan *Plan, a netip.Addr, cost int64) (d Decision, err error) {
	if id == "" || plan == nil || len(plan.limits) == 0 || cost < 0 {
		return p.badConsumer(id, plan, a, cost)
	}
	err = p.decidePlan(ctx, &d, p.consumerKeys.key(id), a, plan, cost, false)
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
	k := p.consumerKeys.key(id)
	if plan == nil || len(plan.limits) == 0 {
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
func (p *Protector) planDecision(ctx context.Context, d *Decision, k Key, a netip.Addr, plan *Plan, cost int64, stream bool, res *PlanResult) {
	d.Addr, d.Key, d.DryRun, d.hdr = a, k, p.cfg.DryRun, &plan.hdr
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
func (p *Protector) fillPlan(d *Decision, plan *Plan, res *PlanResult, cost int64) {
	for j := range plan.limits {
		st := &res.Limits[j]
		t := st.Reset
		if st.RetryAfter > 0 {
			t = st.RetryAfter
		}
		d.planLeft[j] = uint32(min(max(st.Remaining, 0), maxPlanLeft))
		d.planReset[j] = uint32(min(seconds(t), math.MaxUint32))
	}
	i := res.Decider
	if i < 0 || i >= len(plan.limits) { // a store of someone else's that got it wrong
		i = 0
	}
	l, st := &plan.limits[i], &res.Limits[i]
	d.Policy, d.Limit, d.Remaining, d.Window = l.name, l.limit, st.Remaining, l.window
	if !st.Refused() {
		return
	}
	d.Status = Limited
	if l.quota != 0 {
		d.Status = Exhausted
	}
	if st.RetryAfter > 0 {
		d.RetryAfter = st.RetryAfter
		return
	}
	capacity := l.burst
	if l.quota != 0 {
		capacity = l.limit
	}
	d.Err = fmt.Errorf("%w: %s: cost %d, but limit %q of plan %q holds %d", ErrCostTooHigh, d.Key, cost, l.name, plan.name, capacity)
}

// consumerKeys caches the keys of consumer identifiers that ConsumerKey
// does not keep verbatim: hashing costs a SHA-256 and an allocation per
// request, and an address a parse and two allocations ("~" and itself,
// and its way); a hit in the cache costs none of these. Identifiers kept
// verbatim need no cache. What follows is about hashed identifiers; see
// addrHit for addresses.
//
// The cache is a fixed array of 4-way sets, read without a lock. Two
// seeded 64-bit hashes of the identifier are made; the low bits of the
// first pick a set, and a miss replaces one way of it. A way holds the
// key (at most 33 bytes) and both hashes, never the identifier itself: a
// gateway may send identifiers of any length, up to its header cap, and
// the cache must cost the same for each. So it is bounded in bytes
// (keyCacheSets × 4 small entries, allocated on the first one), and an
// attacker with many identifiers costs hashing, never memory. A hit needs
// all 128 bits of the two hashes to match, under seeds no client knows;
// the bits that picked the set match in every way of it, so chance must
// match the other 128 − log2(keyCacheSets). Two identifiers that agree
// on them by chance, or by a client's design, are out of reach: a hash
// of its own for the set would add bits that nothing needs, and one more
// hash to every identifier the cache is asked for.
type consumerKeys struct {
	once  sync.Once
	seeds [2]maphash.Seed // the two halves of the check, the first's low bits the set
	sets  []keyCacheSet
}

const keyCacheSets = 1 << 14

type keyCacheSet struct {
	ways [4]atomic.Pointer[cachedKey]
	next atomic.Uint32 // the way the next miss replaces
}

type cachedKey struct {
	check [2]uint64 // the identifier's hashes under seeds[0] and seeds[1]
	name  string    // its key
}

func (c *consumerKeys) key(id string) Key {
	form := keyShapeOf(id)
	if form == formVerbatim {
		return Key{Name: id}
	}
	c.once.Do(func() {
		c.seeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}
		c.sets = make([]keyCacheSet, keyCacheSets)
	})
	h := maphash.String(c.seeds[0], id)
	set := &c.sets[h&(keyCacheSets-1)]
	if form == formAddr {
		if k, ok := set.addrHit(id); ok {
			return k
		}
	}
	check := [2]uint64{h, maphash.String(c.seeds[1], id)}
	for i := range set.ways {
		if e := set.ways[i].Load(); e != nil && e.check == check {
			return Key{Name: e.name}
		}
	}
	// A miss. Only here is an address-shaped id parsed: one that is no
	// address (a token of hex digits and colons) is hashed, and its
	// next request is a hit above.
	if form == formAddr && isAddrOrCIDR(id) {
		name := "~" + id
		set.ways[set.next.Add(1)%4].Store(&cachedKey{name: name})
		return Key{Name: name}
	}
	k := hashKey(id) // the form is known: ConsumerKey would only look again
	set.ways[set.next.Add(1)%4].Store(&cachedKey{check: check, name: k.Name})
	return k
}

// addrHit looks up an identifier shaped like an address (keyShapeOf),
// whose key, when it is an address or CIDR, is "~" and itself. An address
// is no secret and at most maxVerbatimKey bytes, so a hit compares the
// key with it, exactly, and the first hash alone picks the set. Only an
// id that parsed as an address is stored so, and a hashed key (hex
// digits alone) never equals "~" and an id with a dot or a colon. The
// way's check stays zero, which both hashes of an identifier match by a
// chance of 2^-128.
func (s *keyCacheSet) addrHit(id string) (_ Key, ok bool) {
	for i := range s.ways {
		if e := s.ways[i].Load(); e != nil && len(e.name) == len(id)+1 && e.name[1:] == id {
			return Key{Name: e.name}, true
		}
	}
	return Key{}, false
}
