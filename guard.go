package protect

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpprotect/protect/internal/storeerr"
)

// The guard is the one place where the Protector deals with a store
// outside this process: every call to such a Space goes through it, and
// nothing else in the Protector knows that a store can be slow, down or
// elsewhere. It gives each call a deadline (StoreTimeout), stops calling
// a store that keeps failing (the circuit breaker, breaker.go), answers
// the bans this process knows while the store cannot be asked (held
// bans), applies the failure policy (FailOpen, FailClosed, or FailLocal's
// per-process store, whose bans it writes to the store once it is back),
// publishes the protector's limits, and says in words what went wrong
// (storeerr.go).
//
// A Space that says it is local (LocalSpace) is never guarded: it cannot
// hang, so it is called directly, with no deadline and no breaker.
//
// Bans hold while the store is down. A ban this instance knows — a
// space's copy of the range bans, its cache of key bans (BanHolder) —
// refuses whatever the store's health: the guard asks for it before it
// applies the failure policy, whichever policy that is. And a ban the
// FailLocal store wrote while the store was down is written to the store
// once it answers again, so that it holds on every instance.
type guard struct {
	guarded bool // the space is outside this process: calls go through the guard
	// deadlineOnly: the space needs nothing of a context but its
	// deadline, Done and Err, which deadlines makes cheaply (deadline.go).
	deadlineOnly bool
	deadlines    deadlines
	timeout      time.Duration
	onError      FailurePolicy
	brk          *Circuit     // the store's (CircuitStore), or this protector's own
	held         BanHolder    // the space, when it holds bans in this process; else nil
	local        Space        // FailLocal's per-process fallback; nil otherwise
	localMem     *MemoryStore // the store behind local
	pending      pendingBans  // bans the local store wrote, for the store
	publishing   atomic.Int32 // publishPending, publishRunning, publishDone
	bg           sync.WaitGroup
}

// init sets up the guard of p, whose space is bound to scope.
func (g *guard) init(p *Protector, scope Scope) {
	g.timeout, g.onError = p.cfg.StoreTimeout, p.cfg.OnStoreError
	if l, ok := p.space.(LocalSpace); ok && l.Local() {
		g.brk = new(Circuit)
		g.brk.init(p.cfg.Clock)
		if !p.dryRun { // a dry run enforces nothing: it has no limits to publish
			p.publish() // in process: at once, it costs nothing
		}
		g.publishing.Store(publishDone)
		return
	}
	g.guarded = true
	if d, ok := p.space.(DeadlineSpace); ok {
		g.deadlineOnly = d.DeadlineOnly()
	}
	if cs, ok := p.store.(CircuitStore); ok && cs.Circuit() != nil {
		g.brk = cs.Circuit()
	} else {
		g.brk = new(Circuit)
	}
	g.brk.init(p.cfg.Clock)
	g.held, _ = p.space.(BanHolder)
	if p.dryRun {
		g.publishing.Store(publishDone)
	}
	if g.onError == FailLocal {
		g.localMem = NewMemoryStore(MemoryOptions{Clock: p.cfg.Clock})
		g.local, _ = g.localMem.Space(scope)
	}
}

// close waits for the guard's background calls and closes its local
// store.
func (g *guard) close() {
	g.bg.Wait()
	if g.localMem != nil {
		g.localMem.Close()
	}
}

// storeFailed applies the failure policy to the store error err, writing
// it into d: it reports whether the FailLocal store decides instead, and
// the error to return (ctx's, once ctx has ended). One function for the
// stream and for plans, so that the two never answer an outage apart.
func (p *Protector) storeFailed(ctx context.Context, d *Decision, err error) (local bool, _ error) {
	d.Err, d.hdr = err, nil
	if ctx.Err() != nil {
		d.Status = Unavailable
		return false, ctx.Err()
	}
	p.stats.stripe().storeFailures.Add(1)
	switch {
	case p.heldBanDecision(ctx, d):
		// A ban this instance knows holds whatever the store's health,
		// under every policy.
		return false, nil
	case p.onError == FailClosed:
		d.Status, d.RetryAfter = Unavailable, breakerCooldown
		p.logDryRun(d)
		return false, nil
	case p.onError == FailOpen || p.local == nil: // no local store: an in-process one never fails
		return false, nil
	}
	return true, nil
}

// take calls the store: guarded when it is outside this process; in
// process, with no deadline and no breaker.
func (p *Protector) take(ctx context.Context, k Key, a netip.Addr, n int64) (Result, error) {
	if p.guarded {
		return p.guardedTake(ctx, k, a, n)
	}
	return p.space.Take(ctx, k, a, n)
}

// guardedTake calls a store outside this process: with a deadline, and
// through the circuit breaker.
func (p *Protector) guardedTake(ctx context.Context, k Key, a netip.Addr, n int64) (Result, error) {
	if p.brk.open() {
		if res, ok := p.heldWhileOpen(k, a); ok {
			return res, nil
		}
	}
	res, err := guarded(p, ctx, func(ctx context.Context) (Result, error) {
		return p.space.Take(ctx, k, a, n)
	})
	if err == nil && n > 0 && p.publishing.Load() == publishPending {
		p.publishSoon()
	}
	return res, err
}

// guarded runs one store call with StoreTimeout and through the circuit
// breaker, logging a change of the breaker's state once.
func guarded[R any](p *Protector, ctx context.Context, call func(context.Context) (R, error)) (R, error) {
	var zero R
	if !p.brk.allow() {
		p.stats.stripe().circuitReject.Add(1)
		return zero, ErrStoreUnavailable
	}
	var res R
	var err error
	// The deadline is compared with the real time by the socket, and the
	// latency is real time too: both come from the real clock, never from
	// Config.Clock.
	start := time.Now()
	if p.deadlineOnly {
		res, err = call(p.deadlines.context(ctx, start.Add(p.timeout)))
	} else {
		sctx, cancel := context.WithTimeout(ctx, p.timeout)
		res, err = call(sctx)
		cancel()
	}
	if p.guarded { // the memory store's calls (escalation's) are not store traffic
		p.stats.storeCall(ctx, time.Since(start), err)
	}
	if err == nil {
		if p.brk.success() {
			p.log.LogAttrs(ctx, slog.LevelInfo, "protect: store recovered", slog.String("namespace", p.ns))
		}
		if p.pending.n.Load() != 0 {
			p.writePending()
		}
		return res, nil
	}
	if ctx.Err() != nil {
		// The caller gave up; that says nothing about the store.
		p.brk.release()
		return zero, ctx.Err()
	}
	err = storeerr.Explain(err, p.timeout)
	if p.brk.failure() {
		p.stats.stripe().circuitOpens.Add(1)
		p.log.LogAttrs(ctx, slog.LevelError, "protect: store failing; circuit open",
			slog.String("namespace", p.ns), slog.String("policy", p.onError.String()), slog.Any("error", err))
	}
	return zero, err
}

// storeContext bounds an administrative store call by StoreTimeout.
func (p *Protector) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if !p.guarded {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, p.timeout)
}

// guardedTakePlan calls the store's TakePlan through the deadline and
// the circuit breaker, as guardedTake does for Take.
func (p *Protector) guardedTakePlan(ctx context.Context, k Key, a netip.Addr, plan *Plan, cost int64, stream bool) (PlanResult, error) {
	if p.brk.open() {
		if res, ok := p.heldWhileOpen(k, a); ok {
			return PlanResult{Result: res, Decider: -1}, nil
		}
	}
	res, err := guarded(p, ctx, func(ctx context.Context) (PlanResult, error) {
		return p.space.TakePlan(ctx, k, a, plan, cost, stream)
	})
	if err == nil && cost > 0 && p.publishing.Load() == publishPending {
		p.publishSoon()
	}
	return res, err
}

// heldWhileOpen answers, while the circuit is open, a request that a ban
// held here refuses, without calling the store: a Take answered from
// memory would count as the breaker's probe succeeding, and close the
// circuit on a store that is still dead (three more timeouts each
// cooldown, for as long as a banned client keeps trying).
//
//go:noinline
func (p *Protector) heldWhileOpen(k Key, a netip.Addr) (Result, bool) {
	if p.held == nil {
		return Result{}, false
	}
	return p.held.HeldBan(k, a)
}

// heldBanDecision writes into d a ban this instance knows on d's key or
// address, and reports whether there was one. d.Key and d.Addr are set.
func (p *Protector) heldBanDecision(ctx context.Context, d *Decision) bool {
	if p.held == nil {
		return false
	}
	res, ok := p.held.HeldBan(d.Key, d.Addr)
	if !ok {
		return false
	}
	p.banned(ctx, d, &res)
	return true
}

// maxPendingBans bounds the bans kept for the shared store while it is
// down; past it the oldest are logged and dropped (they still hold here,
// in the FailLocal store, until they end).
const maxPendingBans = 10000

// pendingBans are the bans the FailLocal store wrote while the shared
// store was down, to be written there once it answers.
type pendingBans struct {
	n       atomic.Int64 // len(bans), read on every successful store call
	writing atomic.Bool  // one writer at a time
	mu      sync.Mutex
	bans    []Ban
}

// add keeps b for the shared store.
func (p *Protector) keepBan(b Ban) {
	pb := &p.pending
	pb.mu.Lock()
	defer pb.mu.Unlock()
	if len(pb.bans) >= maxPendingBans {
		p.log.LogAttrs(context.Background(), slog.LevelWarn, "protect: too many bans written while the store is down; this one stays local",
			slog.String("key", pb.bans[0].Key.String()), slog.String("namespace", p.ns))
		pb.bans = pb.bans[1:]
	}
	pb.bans = append(pb.bans, b)
	pb.n.Store(int64(len(pb.bans)))
}

// writePending writes the kept bans to the shared store, in the
// background: the request that found the store back is not held up. Each
// ban is written for the time it has left; one that has ended is dropped;
// one the store refuses stays for the next try; one the store already
// holds a ban on, as long or longer, is left as the store has it. Its offense is not
// written: escalation on the shared store does not count it.
func (p *Protector) writePending() {
	pb := &p.pending
	if !pb.writing.CompareAndSwap(false, true) {
		return
	}
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		defer pb.writing.Store(false)
		pb.mu.Lock()
		bans := pb.bans
		pb.bans = nil
		pb.n.Store(0)
		pb.mu.Unlock()
		var failed []Ban
		for _, b := range bans {
			left := b.Expires.Sub(p.cfg.Clock())
			if !b.Permanent() && left <= 0 {
				continue
			}
			if b.Permanent() {
				left = 0
			}
			ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
			// AddBan replaces: a ban the store got meanwhile (an
			// operator's, another instance's escalated one) that lasts
			// as long or longer stays, rather than be cut down to ours.
			st, err := p.space.Inspect(ctx, b.Key)
			if err == nil && outlasts(st.Ban, b) {
				cancel()
				continue
			}
			if err == nil {
				_, err = p.space.AddBan(ctx, Ban{Key: b.Key, Range: b.Range, Reason: b.Reason, Source: b.Source, By: b.By}, left)
			}
			cancel()
			if err != nil {
				failed = append(failed, b)
				continue
			}
			p.log.LogAttrs(context.Background(), slog.LevelInfo, "protect: ban written while the store was down, now in the store",
				slog.String("key", b.Key.String()), slog.Duration("left", left.Round(time.Second)), slog.String("namespace", p.ns))
		}
		if len(failed) > 0 {
			pb.mu.Lock()
			pb.bans = append(failed, pb.bans...)
			pb.n.Store(int64(len(pb.bans)))
			pb.mu.Unlock()
		}
	}()
}

// outlasts reports whether have, the store's ban on b's key, ends no
// sooner than b.
func outlasts(have *Ban, b Ban) bool {
	switch {
	case have == nil:
		return false
	case have.Permanent():
		return true
	case b.Permanent():
		return false
	}
	return !have.Expires.Before(b.Expires)
}

// Publishing.
//
// A service publishes the limits it enforces under its namespace, so that
// protectctl's inspect and explain, and the service's other instances,
// see its numbers rather than their own defaults. It publishes when it
// first counts a request through the store, not in New: a tool built on
// the same configuration (protectctl) checks and inspects, never counts,
// and must not publish its own defaults over the service's. A store in
// this process is published in New, at no cost.

// Publishing states.
const (
	publishPending = iota
	publishRunning
	publishDone
)

// publishSoon publishes in the background, once: the request that first
// counted through the store is not held up, and a store that fails costs
// a background timeout, never a request's. The calls are not counted in
// Stats and do not move the breaker.
func (p *Protector) publishSoon() {
	if !p.publishing.CompareAndSwap(publishPending, publishRunning) {
		return
	}
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		p.publish()
		p.publishing.Store(publishDone)
	}()
}

// Publish writes the protector's limits to its store now, under its
// namespace, so that protectctl's inspect and explain and the service's
// other instances see them; a service on a shared store does so by
// itself, in the background, when it first counts a request (a tool
// built on the same configuration never counts, and so never publishes
// its defaults). Call it at start to publish at once. It warns in the log
// when the store holds other limits for the namespace. A dry run
// publishes nothing: it enforces nothing.
func (p *Protector) Publish(ctx context.Context) error {
	if p.dryRun {
		return nil
	}
	p.publishing.Store(publishDone)
	ctx, cancel := p.storeContext(ctx)
	defer cancel()
	return p.publishIn(ctx)
}

// publish writes the protector's limits under its namespace, after
// warning loudly when the store already holds other ones for it: another
// process counts the same counters against them, and neither set holds.
// (Within one store value a second set of limits is an error from
// Space.) A failure is logged; the service runs on.
func (p *Protector) publish() {
	ctx, cancel := p.storeContext(context.Background())
	defer cancel()
	p.publishIn(ctx)
}

func (p *Protector) publishIn(ctx context.Context) error {
	was, ok, err := p.store.Published(ctx, p.ns)
	if err == nil && ok && was != p.lim {
		theirs, ours := was.diff(p.lim)
		p.log.LogAttrs(ctx, slog.LevelWarn, "protect: LIMITS DIFFER: another instance counts this namespace with other limits; the counters are shared, so neither set holds. Give each protector its own Namespace.",
			slog.String("namespace", p.ns), slog.String("published", theirs), slog.String("ours", ours))
	}
	if err == nil {
		err = p.space.Publish(ctx)
	}
	if err != nil {
		p.log.LogAttrs(ctx, slog.LevelWarn, "protect: cannot publish this protector's limits; protectctl shows its own defaults for this namespace",
			slog.String("namespace", p.ns), slog.Any("error", err))
		return fmt.Errorf("protect: publish limits of %q: %w", p.ns, err)
	}
	return nil
}
