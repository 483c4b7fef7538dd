package protect

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Bans hold while the store is down. A ban this instance knows — a Redis
// space's copy of the range bans, its cache of key bans — refuses whatever
// the store's health: the Protector asks for it before it applies the
// failure policy, whichever policy that is. And a ban the FailLocal store
// wrote while the shared store was down is written to the shared store
// once it answers again, so that it holds on every instance.

// A heldBans space answers, without I/O, from the bans this process
// holds. While the store cannot be asked, what it last said is the best
// answer there is: a cached key ban holds past its cache age (BanCacheTTL
// bounds how soon a lift elsewhere is seen, and no lift can be seen while
// the store is down) until the ban's own end.
type heldBans interface {
	heldBan(k Key, addr netip.Addr) (Result, bool)
}

// heldBan implements heldBans.
func (sp *redisSpace) heldBan(k Key, addr netip.Addr) (Result, bool) {
	t := sp.s.now()
	if r, banned := sp.bns.ranges.Load().banned(addr, t); banned {
		return r, true
	}
	s := sp.s
	if s.cached.Load() == 0 {
		return Result{}, false
	}
	s.cacheMu.Lock()
	c, ok := s.cache[cacheKey{sp.bns, k}]
	s.cacheMu.Unlock()
	if !ok || !c.held.live(t) {
		return Result{}, false
	}
	return c.held.result(t), true
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
	return p.held.heldBan(k, a)
}

// heldBanDecision writes into d a ban this instance knows on d's key or
// address, and reports whether there was one. d.Key and d.Addr are set.
func (p *Protector) heldBanDecision(ctx context.Context, d *Decision) bool {
	if p.held == nil {
		return false
	}
	res, ok := p.held.heldBan(d.Key, d.Addr)
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
