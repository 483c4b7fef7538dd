package protect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpprotect/protect/store"
)

// The guard is the one place where the Protector deals with a store
// outside this process: every call to such a Space goes through it, and
// nothing else in the Protector knows that a store can be slow, down or
// elsewhere. It gives each call a deadline (StoreTimeout), stops calling
// a store that keeps failing (the circuit breaker, store/circuit.go), answers
// the bans this process knows while the store cannot be asked (held
// bans), applies the failure policy (FailOpen, FailClosed, or FailLocal's
// per-process store, whose bans it writes to the store once it is back),
// publishes the protector's limits, and says in words what went wrong
// (store/explain.go).
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
	p *Protector
	// deadlineOnly: the space needs nothing of a context but its
	// deadline, Done and Err, which deadlines makes cheaply (deadline.go).
	deadlineOnly bool
	deadlines    deadlines
	brk          *store.Circuit  // the store's (CircuitStore), or this protector's own
	held         store.BanHolder // the space, when it holds bans in this process; else nil
	local        store.Space     // FailLocal's per-process fallback; nil otherwise
	localMem     *MemoryStore    // the store behind local
	pending      pendingBans     // bans the local store wrote, for the store
	publishing   atomic.Int32    // publishPending, publishRunning, publishDone
	damage       damageLog       // the damaged records logged (malformed.go)

	bgMu   sync.Mutex // guards closed against bg.Add
	closed bool       // close was called: nothing more starts in the background
	bg     sync.WaitGroup
}

// A guardedSpace is a space outside this process as the Protector calls
// it: every call with a deadline, a request's through the circuit
// breaker. The protector's own space (main) also answers from the bans
// it holds while the circuit is open, and publishes the protector's
// limits once it counts; its escalation space does neither.
type guardedSpace struct {
	store.Space
	g    *guard
	main bool
}

// guardSpace returns the space p calls for sp, bound to scope: sp itself
// when it is local, else sp behind p's guard, which it makes on first
// use.
func (p *Protector) guardSpace(sp store.Space, scope store.Scope, main bool) store.Space {
	if l, ok := sp.(store.LocalSpace); ok && l.Local() {
		return sp
	}
	if p.guard == nil {
		g := &guard{p: p}
		if d, ok := sp.(store.DeadlineSpace); ok {
			g.deadlineOnly = d.DeadlineOnly()
		}
		if cs, ok := p.store.(store.CircuitStore); ok && cs.Circuit() != nil {
			g.brk = cs.Circuit()
		} else {
			g.brk = new(store.Circuit)
		}
		g.brk.SetClock(p.cfg.Clock)
		g.held, _ = sp.(store.BanHolder)
		if p.cfg.DryRun {
			g.publishing.Store(publishDone) // a dry run enforces nothing: it has no limits to publish
		}
		if p.cfg.OnStoreError == FailLocal {
			g.localMem = NewMemoryStore(MemoryOptions{Clock: p.cfg.Clock})
			g.local, _ = g.localMem.Space(scope)
		}
		p.guard = g
	}
	return guardedSpace{Space: sp, g: p.guard, main: main}
}

// close waits for the guard's background calls and closes its local
// store.
func (g *guard) close() {
	g.bgMu.Lock()
	g.closed = true
	g.bgMu.Unlock()
	g.bg.Wait()
	if g.localMem != nil {
		g.localMem.Close()
	}
}

// spawn runs f in the background, unless the guard is closed: a request
// still in flight when Close is called must not start work on a store
// its owner closes next. It reports whether f runs.
func (g *guard) spawn(f func()) bool {
	g.bgMu.Lock()
	defer g.bgMu.Unlock()
	if g.closed {
		return false
	}
	g.bg.Add(1)
	go func() {
		defer g.bg.Done()
		f()
	}()
	return true
}

// Take implements Space: with a deadline, through the circuit breaker.
func (gs guardedSpace) Take(ctx context.Context, k Key, a netip.Addr, n int64) (store.Result, error) {
	g := gs.g
	if gs.main && g.brk.Open() {
		if res, ok := g.heldWhileOpen(k, a); ok {
			return res, nil
		}
	}
	res, err := guarded(g, ctx, k, func(ctx context.Context) (store.Result, error) {
		return gs.Space.Take(ctx, k, a, n)
	})
	if err == nil && n > 0 && gs.main && g.publishing.Load() == publishPending {
		g.p.publishSoon()
	}
	return res, err
}

// TakePlan implements Space, as Take does.
func (gs guardedSpace) TakePlan(ctx context.Context, k Key, a netip.Addr, plan *Plan, cost int64, stream bool) (store.PlanResult, error) {
	g := gs.g
	if gs.main && g.brk.Open() {
		if res, ok := g.heldWhileOpen(k, a); ok {
			return store.PlanResult{Result: res, Decider: -1}, nil
		}
	}
	res, err := guarded(g, ctx, k, func(ctx context.Context) (store.PlanResult, error) {
		return gs.Space.TakePlan(ctx, k, a, plan, cost, stream)
	})
	if err == nil && cost > 0 && gs.main && g.publishing.Load() == publishPending {
		g.p.publishSoon()
	}
	return res, err
}

// AddBan implements Space, within StoreTimeout. An operator's calls do
// not go through the breaker: they are few, and each says what failed.
func (gs guardedSpace) AddBan(ctx context.Context, b Ban, length time.Duration) (Ban, error) {
	ctx, cancel := context.WithTimeout(ctx, gs.g.p.cfg.StoreTimeout)
	defer cancel()
	return gs.Space.AddBan(ctx, b, length)
}

// Lift implements Space, within StoreTimeout.
func (gs guardedSpace) Lift(ctx context.Context, k Key) (Ban, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, gs.g.p.cfg.StoreTimeout)
	defer cancel()
	return gs.Space.Lift(ctx, k)
}

// Bans implements Space, within StoreTimeout.
func (gs guardedSpace) Bans(ctx context.Context, f BanFilter) ([]Ban, error) {
	ctx, cancel := context.WithTimeout(ctx, gs.g.p.cfg.StoreTimeout)
	defer cancel()
	return gs.Space.Bans(ctx, f)
}

// Inspect implements Space, within StoreTimeout.
func (gs guardedSpace) Inspect(ctx context.Context, k Key) (KeyState, error) {
	ctx, cancel := context.WithTimeout(ctx, gs.g.p.cfg.StoreTimeout)
	defer cancel()
	return gs.Space.Inspect(ctx, k)
}

// Publish implements Space, within StoreTimeout.
func (gs guardedSpace) Publish(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, gs.g.p.cfg.StoreTimeout)
	defer cancel()
	return gs.Space.Publish(ctx)
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
	p.stats.stripe(d.hint() ^ keyHint(d.Key)).storeFailures.Add(1)
	switch {
	case p.heldBanDecision(ctx, d):
		// A ban this instance knows holds whatever the store's health,
		// under every policy.
		return false, nil
	case p.cfg.OnStoreError == FailClosed:
		d.Status, d.RetryAfter = Unavailable, store.CircuitCooldown
		p.logDryRun(d)
		return false, nil
	case p.cfg.OnStoreError == FailOpen || p.guard == nil || p.guard.local == nil: // no local store: an in-process one never fails
		return false, nil
	}
	return true, nil
}

// takeFailed decides d's key, counting n, after the store failed with
// err: by the failure policy, or by the FailLocal store, whose new bans
// are kept for the store. The error is non-nil only when ctx ended.
//
//go:noinline
func (p *Protector) takeFailed(ctx context.Context, d *Decision, n int64, err error) error {
	if p.allowedHere(d.Addr) {
		d.Status = Safe
		return nil
	}
	d.Limit, d.Window, d.DryRun = p.cfg.MaxRequests, p.lim.TTL, p.cfg.DryRun
	if local, err := p.storeFailed(ctx, d, err); !local {
		return err
	}
	res, _ := p.guard.local.Take(ctx, d.Key, d.Addr, n)
	if res.NewBan {
		p.guard.keepBan(*res.Ban)
	}
	p.streamDecision(ctx, d, n, &res)
	return nil
}

// allowedHere reports whether the store's allowlist, as this process
// holds it, passes a: while the store fails, an allowed client is Safe
// rather than decided by the failure policy.
func (p *Protector) allowedHere(a netip.Addr) bool {
	al, ok := p.raw.(store.Allowlist)
	return ok && a.IsValid() && al.Holds(a)
}

// guarded runs one store call with StoreTimeout and through the circuit
// breaker, logging a change of the breaker's state once.
// k is the key the call is about, which picks the stripe a refusal of
// the breaker is counted on.
func guarded[R any](g *guard, ctx context.Context, k Key, call func(context.Context) (R, error)) (R, error) {
	p := g.p
	var zero R
	if !g.brk.Allow() {
		p.stats.stripe(keyHint(k)).circuitReject.Add(1)
		return zero, ErrStoreUnavailable
	}
	var res R
	var err error
	// The deadline is compared with the real time by the socket, and the
	// latency is real time too: both come from the real clock, never from
	// Config.Clock.
	start := time.Now()
	if g.deadlineOnly {
		res, err = call(g.deadlines.context(ctx, start.Add(p.cfg.StoreTimeout)))
	} else {
		sctx, cancel := context.WithTimeout(ctx, p.cfg.StoreTimeout)
		res, err = call(sctx)
		cancel()
	}
	if err != nil && errors.Is(err, ErrMalformed) {
		// One damaged record: res decides as if it were absent, and the
		// store answered, which is all the breaker asks (malformed.go).
		g.malformed(ctx, k, err)
		err = nil
	}
	p.stats.storeCall(ctx, time.Since(start), err)
	if err != nil && errors.Is(err, store.ErrNotAcknowledged) {
		// The store answered: the breaker counts a success, and the
		// failure policy decides this request (malformed.go).
		if g.brk.Success() {
			p.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "protect: store recovered", slog.String("namespace", p.cfg.Namespace))
		}
		return zero, store.ExplainError(err, p.cfg.StoreTimeout)
	}
	if err == nil {
		if g.brk.Success() {
			p.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "protect: store recovered", slog.String("namespace", p.cfg.Namespace))
		}
		if g.pending.n.Load() != 0 {
			g.writePending()
		}
		return res, nil
	}
	if ctx.Err() != nil {
		// The caller gave up; that says nothing about the store.
		g.brk.Release()
		return zero, ctx.Err()
	}
	err = store.ExplainError(err, p.cfg.StoreTimeout)
	if g.brk.Failure() {
		p.stats.stripe(0).circuitOpens.Add(1)
		p.cfg.Logger.LogAttrs(ctx, slog.LevelError, "protect: store failing; circuit open",
			slog.String("namespace", p.cfg.Namespace), slog.String("policy", p.cfg.OnStoreError.String()), slog.Any("error", err))
	}
	return zero, err
}

// takePlanFailed is takeFailed for a plan.
//
//go:noinline
func (p *Protector) takePlanFailed(ctx context.Context, d *Decision, k Key, a netip.Addr, plan *Plan, cost int64, stream bool, err error) error {
	d.Addr, d.Key, d.DryRun = a, k, p.cfg.DryRun
	if p.allowedHere(a) {
		d.Status = Safe
		return nil
	}
	if local, err := p.storeFailed(ctx, d, err); !local {
		return err
	}
	res, lerr := p.guard.local.TakePlan(ctx, k, a, plan, cost, stream)
	if lerr != nil {
		return nil // the arguments were checked: this cannot happen
	}
	if res.NewBan {
		p.guard.keepBan(*res.Ban)
	}
	p.planDecision(ctx, d, k, a, plan, cost, stream, &res)
	d.Err = err
	return nil
}

// heldWhileOpen answers, while the circuit is open, a request that a ban
// held here refuses, without calling the store: a Take answered from
// memory would count as the breaker's probe succeeding, and close the
// circuit on a store that is still dead (three more timeouts each
// cooldown, for as long as a banned client keeps trying).
//
//go:noinline
func (g *guard) heldWhileOpen(k Key, a netip.Addr) (store.Result, bool) {
	if g.held == nil {
		return store.Result{}, false
	}
	return g.held.HeldBan(k, a)
}

// heldBanDecision writes into d a ban this instance knows on d's key or
// address, and reports whether there was one. d.Key and d.Addr are set.
func (p *Protector) heldBanDecision(ctx context.Context, d *Decision) bool {
	if p.guard == nil || p.guard.held == nil {
		return false
	}
	res, ok := p.guard.held.HeldBan(d.Key, d.Addr)
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

// keepBan keeps b for the store.
func (g *guard) keepBan(b Ban) {
	p, pb := g.p, &g.pending
	pb.mu.Lock()
	defer pb.mu.Unlock()
	if len(pb.bans) >= maxPendingBans {
		p.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, "protect: too many bans written while the store is down; this one stays local",
			slog.String("key", pb.bans[0].Key.String()), slog.String("namespace", p.cfg.Namespace))
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
func (g *guard) writePending() {
	p, pb := g.p, &g.pending
	if !pb.writing.CompareAndSwap(false, true) {
		return
	}
	started := g.spawn(func() {
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
			// AddBan replaces: a ban the store got meanwhile (an
			// operator's, another instance's escalated one) that lasts
			// as long or longer stays, rather than be cut down to ours.
			// The guarded space bounds each call by StoreTimeout.
			ctx := context.Background()
			st, err := p.space.Inspect(ctx, b.Key)
			if err == nil && outlasts(st.Ban, b) {
				continue
			}
			if err == nil {
				_, err = p.space.AddBan(ctx, Ban{Key: b.Key, Range: b.Range, Reason: b.Reason, Source: b.Source, By: b.By}, left)
			}
			if errors.Is(err, store.ErrAllowed) {
				continue // allowed meanwhile: the ban is not wanted any more
			}
			if err != nil {
				failed = append(failed, b)
				continue
			}
			p.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, "protect: ban written while the store was down, now in the store",
				slog.String("key", b.Key.String()), slog.Duration("left", left.Round(time.Second)), slog.String("namespace", p.cfg.Namespace))
		}
		if len(failed) > 0 {
			pb.mu.Lock()
			pb.bans = append(failed, pb.bans...)
			pb.n.Store(int64(len(pb.bans)))
			pb.mu.Unlock()
		}
	})
	if !started {
		pb.writing.Store(false)
	}
}

// outlasts reports whether have, the store's ban on b's key, ends no
// sooner than b.
func outlasts(have *Ban, b Ban) bool {
	switch {
	case have == nil || have.Malformed != "": // a damaged record holds nothing: ours replaces it
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
	g := p.guard
	if !g.publishing.CompareAndSwap(publishPending, publishRunning) {
		return
	}
	if !g.spawn(func() {
		p.publish()
		g.publishing.Store(publishDone)
	}) {
		g.publishing.Store(publishPending)
	}
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
	if p.cfg.DryRun {
		return nil
	}
	if p.guard != nil {
		p.guard.publishing.Store(publishDone)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StoreTimeout)
	defer cancel()
	return p.publishIn(ctx)
}

// publish writes the protector's limits under its namespace, after
// warning loudly when the store already holds other ones for it: another
// process counts the same counters against them, and neither set holds.
// (Within one store value a second set of limits is an error from
// Space.) A failure is logged; the service runs on.
func (p *Protector) publish() {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.StoreTimeout)
	defer cancel()
	p.publishIn(ctx)
}

func (p *Protector) publishIn(ctx context.Context) error {
	was, ok, err := p.store.Published(ctx, p.cfg.Namespace)
	if err == nil && ok && was != p.lim {
		theirs, ours := was.Diff(p.lim)
		p.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "protect: LIMITS DIFFER: another instance counts this namespace with other limits; the counters are shared, so neither set holds. Give each protector its own Namespace.",
			slog.String("namespace", p.cfg.Namespace), slog.String("published", theirs), slog.String("ours", ours))
	}
	if err == nil {
		err = p.space.Publish(ctx)
	}
	if err != nil {
		p.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "protect: cannot publish this protector's limits; protectctl shows its own defaults for this namespace",
			slog.String("namespace", p.cfg.Namespace), slog.Any("error", err))
		return fmt.Errorf("protect: publish limits of %q: %w", p.cfg.Namespace, err)
	}
	return nil
}
