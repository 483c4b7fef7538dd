package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/httpprotect/protect/store"
)

// The range bans' local copies (bancache.go): loaded on a namespace's
// first Take, and read again every RangeRefresh.

// ready loads ns's range bans on its first Take, so that a fresh instance
// never serves a banned range.
func (s *Store) ready(ctx context.Context, ns *redisNamespace) error {
	if ns.loaded.Load() {
		return nil
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.loaded.Load() {
		return nil
	}
	if err := s.loadRanges(ctx, ns); err != nil {
		return err
	}
	s.loadAllows(ctx, ns) // logged there; no allowlist is the strict side
	ns.loaded.Store(true)
	return nil
}

func rangesKey(ns string) string { return ns + "ranges" }

// rangeCall runs the ranges script, through s.once so that its failures
// reach topology.failed (topology.go): the refresher calls it even while
// the circuit is open.
func (s *Store) rangeCall(ctx context.Context, ns string, args ...any) (now int64, bans []store.Ban, err error) {
	v, err := rangesScript.Run(ctx, s.once(), []string{rangesKey(ns), s.rangeStreamKey(ns)}, append([]any{s.journal}, args...)...).Slice()
	if err != nil {
		return 0, nil, fmt.Errorf("protect: redis range bans: %w", err)
	}
	now, bans, err = decodeRanges(v, func(field string, err error) {
		s.damage.logOnce(rangesKey(ns), field, "protect: skipping a range ban whose field is not a range", "range", field, "error", err)
	})
	if err != nil {
		return 0, nil, fmt.Errorf("protect: redis range bans: %w", err)
	}
	return now, bans, nil
}

// loadRanges replaces ns's range bans with what Redis holds, converting
// Redis' expiry times into local ticks.
func (s *Store) loadRanges(ctx context.Context, ns *redisNamespace) error {
	now, bans, err := s.rangeCall(ctx, ns.name, "list")
	if err != nil {
		return err
	}
	t := s.now()
	held := make([]store.RangeEntry, 0, len(bans))
	for _, b := range bans {
		if b.Malformed != "" { // refuses nothing: see protect.ErrMalformed
			s.damage.logOnce(rangesKey(ns.name), b.Key.String(), "protect: malformed range ban record, not enforced; lift it (protectctl lift) or repair it",
				"key", rangesKey(ns.name), "range", b.Key.String(), "error", b.Malformed)
			continue
		}
		h := store.RangeEntry{Prefix: b.Key.Prefix, Ban: b}
		if !b.Permanent() {
			h.End = t + int64(time.Duration(b.Expires.UnixMilli()-now)*time.Millisecond)
		}
		held = append(held, h)
	}
	ns.ranges.Store(store.NewRangeSet(held))
	return nil
}

// reloadRanges re-reads ns's range bans after a change through this store,
// if this store serves ns. One that does not (protectctl, say) has no copy
// to bring up to date: its first Take in ns loads one.
func (s *Store) reloadRanges(ctx context.Context, ns *redisNamespace) {
	if ns.loaded.Load() {
		s.loadRanges(ctx, ns)
		s.loadAllows(ctx, ns)
	}
}

// Refresh re-reads the range bans of every namespace in use now, rather
// than at the next RangeRefresh tick, and writes again the limits this
// store's spaces published when republishEvery has passed since it last
// did (published.go).
func (s *Store) Refresh(ctx context.Context) error {
	c := &s.bans
	c.nsMu.Lock()
	var inUse []*redisNamespace // gathered here, not returned by a method: it stays on the stack
	for _, ns := range c.namespaces {
		if ns.loaded.Load() {
			inUse = append(inUse, ns)
		}
	}
	c.nsMu.Unlock()
	var errs []error
	for _, ns := range inUse {
		if err := s.loadRanges(ctx, ns); err != nil {
			errs = append(errs, err)
		}
		s.loadAllows(ctx, ns)
	}
	if err := s.pub.republish(ctx, s.now); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// refreshEvery re-reads the range bans of every namespace in use, logging
// one line when refreshing starts failing and one when it recovers.
func (s *Store) refreshEvery(interval time.Duration) {
	defer s.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(interval, time.Second))
		err := s.Refresh(ctx)
		cancel()
		if (err != nil) != failing {
			failing = err != nil
			if failing {
				s.log.Error("protect: cannot refresh range bans and published limits; keeping the last copy", "error", err)
			} else {
				s.log.Info("protect: range bans and published limits refreshed again")
			}
		}
	}
}
