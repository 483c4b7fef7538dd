package protect

import (
	"context"
	"log/slog"
)

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

// publish writes the protector's limits under its namespace, after
// warning loudly when the store already holds other ones for it: another
// process counts the same counters against them, and neither set holds.
// (Within one store value a second set of limits is an error from
// Space.) A failure is logged; the service runs on.
func (p *Protector) publish() {
	ctx, cancel := p.storeContext(context.Background())
	defer cancel()
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
	}
}
