package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/store"
)

// ErrNoAllowlist is returned for the allowlist of a ban list whose store
// keeps none (store.Allowlist).
var ErrNoAllowlist = errors.New("admin: the store keeps no allowlist")

// AllowOptions describe allowlist entries. The zero value allows until
// the entry is removed, with no reason and nobody named.
type AllowOptions struct {
	// For is how long the entry lasts; 0: until Disallow.
	For    time.Duration
	Reason string
	By     string
}

// AllowRequest is the body of POST /v1/allows. The zero value allows
// nothing.
type AllowRequest struct {
	Targets []string `json:"targets"`
	// For is the entry's length as a Go duration ("1h"); "" lasts until
	// it is removed.
	For    string `json:"for"`
	Reason string `json:"reason"`
	By     string `json:"by"`
}

// AllowResult is the answer of POST /v1/allows: the entries added and
// the bans they lifted.
type AllowResult struct {
	Allowed []BanRecord `json:"allowed"`
	Lifted  []BanRecord `json:"lifted"`
}

// allowlist is a's store's allowlist.
func (a *Admin) allowlist() (store.Allowlist, error) {
	al, ok := a.p.Space().(store.Allowlist)
	if !ok {
		return nil, ErrNoAllowlist
	}
	return al, nil
}

// Allow puts each target (an address, which allows its counting key, or
// a CIDR) on the allowlist for o.For, then lifts the bans each covers
// (Protector.Lift, so they are counted, logged and journaled as lifts).
// The entry goes first, so that no ban is written between the lift and
// it. While it lasts the key, or every address in the range, is Safe on
// every instance that shares the store: never counted, never banned. A
// consumer:NAME target is an error wrapping protect.ErrBadTarget, and so
// is a CIDR wider than a /8 of IPv4 or a /16 of IPv6; every target is
// checked before anything is written.
func (a *Admin) Allow(ctx context.Context, targets []string, o AllowOptions) (allowed, lifted []protect.Ban, err error) {
	al, err := a.allowlist()
	if err != nil {
		return nil, nil, err
	}
	switch {
	case len(o.Reason) > protect.MaxReasonLen:
		return nil, nil, fmt.Errorf("%w: allow: a reason of %d bytes; at most %d", protect.ErrReasonTooLong, len(o.Reason), protect.MaxReasonLen)
	case o.For < 0 || o.For > protect.MaxDuration:
		return nil, nil, badf("allow: for %v: want a duration from 1s to %v, or none to last until removed", o.For, protect.MaxDuration)
	}
	keys, err := a.allowTargets(targets)
	if err != nil {
		return nil, nil, err
	}
	allowed, lifted = []protect.Ban{}, []protect.Ban{}
	for i, k := range keys {
		cctx, cancel := a.deadline(ctx)
		e, err := al.Allow(cctx, store.Ban{Key: k.Key, Range: k.IsRange, Reason: o.Reason, By: o.By}, o.For)
		cancel()
		if err != nil {
			return allowed, lifted, fmt.Errorf("admin: allow %s: %w", k.Key, err)
		}
		allowed = append(allowed, e)
		bans, err := a.p.Lift(ctx, targets[i], o.By)
		lifted = append(lifted, bans...)
		if err != nil {
			return allowed, lifted, err
		}
	}
	return allowed, lifted, nil
}

// Disallow removes the allowlist entry on each target, as Allow names
// them, and returns those that were in force.
func (a *Admin) Disallow(ctx context.Context, targets []string) ([]protect.Ban, error) {
	al, err := a.allowlist()
	if err != nil {
		return nil, err
	}
	keys, err := a.allowTargets(targets)
	if err != nil {
		return nil, err
	}
	out := []protect.Ban{}
	for _, k := range keys {
		cctx, cancel := a.deadline(ctx)
		e, ok, err := al.Disallow(cctx, k.Key)
		cancel()
		if err != nil {
			return out, fmt.Errorf("admin: disallow %s: %w", k.Key, err)
		}
		if ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// Allows lists the allowlist entries in force.
func (a *Admin) Allows(ctx context.Context) ([]protect.Ban, error) {
	al, err := a.allowlist()
	if err != nil {
		return nil, err
	}
	ctx, cancel := a.deadline(ctx)
	defer cancel()
	out, err := al.Allows(ctx)
	if err != nil {
		return nil, fmt.Errorf("admin: allows: %w", err)
	}
	return out, nil
}

// checkAllowed refuses targets that an entry of the allowlist covers,
// reading it once: a store may check only the copy it holds (Redis, in
// a process that does not serve the namespace, holds none).
func (a *Admin) checkAllowed(ctx context.Context, targets []string) error {
	if _, err := a.allowlist(); err != nil {
		return nil // no allowlist: nothing covers anything
	}
	entries, err := a.Allows(ctx)
	if err != nil {
		return fmt.Errorf("admin: ban: reading the allowlist: %w", err)
	}
	for _, s := range targets {
		k, _, err := a.Target(s)
		if err != nil || !k.Prefix.IsValid() {
			continue
		}
		for _, e := range entries {
			if p := e.Key.Prefix; p.Bits() <= k.Prefix.Bits() && p.Contains(k.Prefix.Addr()) {
				return fmt.Errorf("admin: ban %s: %w (%s: %s)", s, store.ErrAllowed, e.Key, e.Reason)
			}
		}
	}
	return nil
}

// allowKey is a target of the allowlist: its key, and whether a range.
type allowKey struct {
	Key     protect.Key
	IsRange bool
}

// allowTargets parses targets, refusing consumers and wide CIDRs.
func (a *Admin) allowTargets(targets []string) ([]allowKey, error) {
	if len(targets) == 0 {
		return nil, fmt.Errorf("%w: name at least one address or CIDR", protect.ErrBadTarget)
	}
	if err := checkCount("allow", len(targets)); err != nil {
		return nil, err
	}
	keys := make([]allowKey, 0, len(targets))
	var errs []error
	for _, s := range targets {
		if err := a.CheckTarget(s, false); err != nil {
			errs = append(errs, err)
			continue
		}
		k, isRange, _ := a.Target(s)
		if !k.Prefix.IsValid() {
			errs = append(errs, fmt.Errorf("%w: %q: only an address or a CIDR can be allowed", protect.ErrBadTarget, s))
			continue
		}
		keys = append(keys, allowKey{k, isRange})
	}
	return keys, errors.Join(errs...)
}

// Allow is Admin.Allow on every ban list of s.
func (s *Service) Allow(ctx context.Context, targets []string, o AllowOptions) (AllowResult, error) {
	out := AllowResult{Allowed: []BanRecord{}, Lifted: []BanRecord{}}
	lists := s.lists()
	for _, a := range lists {
		if _, err := a.allowTargets(targets); err != nil {
			return out, err
		}
	}
	for _, a := range lists {
		allowed, lifted, err := a.Allow(ctx, targets, o)
		out.Allowed = append(out.Allowed, a.Records(allowed)...)
		out.Lifted = append(out.Lifted, a.Records(lifted)...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// Disallow is Admin.Disallow on every ban list of s.
func (s *Service) Disallow(ctx context.Context, targets []string) ([]BanRecord, error) {
	out := []BanRecord{}
	for _, a := range s.lists() {
		got, err := a.Disallow(ctx, targets)
		out = append(out, a.Records(got)...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// Allows is Admin.Allows on every ban list of s, ordered as bans are.
func (s *Service) Allows(ctx context.Context) ([]BanRecord, error) {
	out := []BanRecord{}
	for _, a := range s.lists() {
		got, err := a.Allows(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, a.Records(got)...)
	}
	sortRecords(out)
	return out, nil
}
