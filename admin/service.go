package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/httpprotect/protect"
)

// A Service administers every protector of one service as one system:
// its ban lists (one per distinct BanNamespace, shared by default), and
// each protector's counters and limits. It is what Handler serves and
// what protectctl runs its commands on, so that both give the same
// records. The zero value covers no protector; call NewService.
//
// Its methods return the records of protectctl's -json schema. A bad
// target or namespace is an error that wraps protect.ErrBadTarget,
// protect.ErrWideTarget, ErrNoTarget or ErrUnknownNamespace; any other
// error is the store's.
type Service struct {
	admins []*Admin
}

// NewService returns a Service over ps, in the order the service runs
// them (the outermost first): Explain reports the first of them that
// refuses, Inspect leads with the first.
func NewService(ps ...*protect.Protector) *Service {
	s := &Service{admins: make([]*Admin, 0, len(ps))}
	for _, p := range ps {
		if p != nil {
			s.admins = append(s.admins, New(p))
		}
	}
	return s
}

// ErrUnknownNamespace is returned by Service.Select for a namespace that
// no protector of the service counts or bans under: an answer from
// nothing would read as "no bans".
var ErrUnknownNamespace = errors.New("admin: no protector has this namespace")

// Select returns the Service of the protectors whose Namespace or
// BanNamespace is ns; "" selects every one. No match is an error that
// wraps ErrUnknownNamespace and names the namespaces there are.
func (s *Service) Select(ns string) (*Service, error) {
	if ns == "" {
		return s, nil
	}
	out := &Service{}
	var have []string
	for _, a := range s.admins {
		cfg := a.p.Config()
		if cfg.Namespace == ns || cfg.BanNamespace == ns {
			out.admins = append(out.admins, a)
		}
		have = appendNew(have, cfg.Namespace, cfg.BanNamespace)
	}
	if len(out.admins) == 0 {
		return nil, fmt.Errorf("%w: %q (the service has %s)", ErrUnknownNamespace, ns, strings.Join(quoteAll(have), ", "))
	}
	return out, nil
}

func appendNew(list []string, vs ...string) []string {
	for _, v := range vs {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}

func quoteAll(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// Lists returns one Admin per distinct ban list (BanNamespace), the
// first protector on each: bans are listed and written once per list,
// not per protector.
func (s *Service) Lists() []*Admin { return s.lists() }

func (s *Service) lists() []*Admin {
	var out []*Admin
	var seen []string
	for _, a := range s.admins {
		bns := a.p.Config().BanNamespace
		if !slices.Contains(seen, bns) {
			seen = append(seen, bns)
			out = append(out, a)
		}
	}
	return out
}

// Protectors describes each protector: its namespaces and the limits
// published for its namespace.
func (s *Service) Protectors(ctx context.Context) ([]ProtectorRecord, error) {
	out := make([]ProtectorRecord, 0, len(s.admins))
	for _, a := range s.admins {
		r, err := a.ProtectorRecord(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Bans lists the active bans f selects in every ban list of the service,
// soonest expiry first and permanent bans last (or as f.Sort says), each
// naming its list. It is BansPage without the count.
func (s *Service) Bans(ctx context.Context, f Filter) ([]BanRecord, error) {
	recs, _, err := s.BansPage(ctx, f)
	return recs, err
}

// sortRecords orders bans as Protector.Bans does: soonest expiry first,
// permanent next, then the damaged records a store could not read (they
// refuse nothing and carry no time), each group by list and key. It
// reads only what every record has, so no record a store returns can
// stop a listing.
func sortRecords(rs []BanRecord) {
	slices.SortStableFunc(rs, func(a, b BanRecord) int {
		if c := cmp.Compare(recordRank(a), recordRank(b)); c != 0 {
			return c
		}
		if recordRank(a) == 0 {
			if c := a.Expires.Compare(*b.Expires); c != 0 {
				return c
			}
		}
		if c := strings.Compare(a.BanNamespace, b.BanNamespace); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
}

// recordRank is a record's group in a listing: 0 for a ban that ends (and
// says when), 1 for a permanent one, 2 for one without a readable end.
func recordRank(r BanRecord) int {
	switch {
	case r.Malformed != "":
		return 2
	case r.Permanent:
		return 1
	case r.Expires == nil:
		return 2
	}
	return 0
}

// MaxTargets is the most targets one ban or lift names (Service.Ban,
// Service.Lift, the admin API): a request of more holds that many bans'
// worth of memory at once; split it.
const MaxTargets = 10_000

// ErrTooManyTargets is wrapped by the error of a ban or lift of more than
// MaxTargets targets.
var ErrTooManyTargets = errors.New("admin: too many targets")

func checkCount(what string, n int) error {
	if n > MaxTargets {
		return fmt.Errorf("%w: %s takes at most %d targets a request, got %d: split them", ErrTooManyTargets, what, MaxTargets, n)
	}
	return nil
}

// Ban adds a manual ban on each target in every ban list of the service:
// an operator's ban refuses the client everywhere the service serves it.
// Every target is checked first; a bad one writes nothing. It takes at
// most MaxTargets targets.
func (s *Service) Ban(ctx context.Context, targets []string, opt protect.BanOptions) ([]BanRecord, error) {
	if len(targets) == 0 {
		return nil, fmt.Errorf("%w: ban needs at least one target", protect.ErrBadTarget)
	}
	if err := checkCount("ban", len(targets)); err != nil {
		return nil, err
	}
	lists := s.lists()
	for _, a := range lists {
		if err := a.checkBans(targets, opt.Force); err != nil {
			return nil, err
		}
	}
	out := []BanRecord{}
	for _, a := range lists {
		bans, err := a.Ban(ctx, targets, opt)
		out = append(out, a.Records(bans)...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// LiftOptions says what Service.Lift lifts. The zero value lifts nothing
// (ErrNoTarget).
type LiftOptions struct {
	// Targets are addresses (each lifts the key it is counted under),
	// CIDRs (each lifts every ban inside it) and consumer:NAME keys.
	Targets []string
	// All lifts every ban, and takes no Targets.
	All bool
	// Force lifts inside CIDRs wider than a /8 of IPv4 or a /16 of IPv6.
	Force bool
	// By names who lifts, for the log.
	By string
}

// Lift lifts bans in every ban list of the service. An address is lifted
// as each protector counts it, so that a ban written under any
// protector's aggregation is found. Targets are checked before anything
// is lifted.
func (s *Service) Lift(ctx context.Context, o LiftOptions) ([]BanRecord, error) {
	switch {
	case o.All && len(o.Targets) > 0:
		return nil, fmt.Errorf("%w: lifting every ban takes no target", protect.ErrBadTarget)
	case !o.All && len(o.Targets) == 0:
		return nil, ErrNoTarget
	}
	if err := checkCount("lift", len(o.Targets)); err != nil {
		return nil, err
	}
	for _, a := range s.admins {
		if err := a.checkTargets(o.Targets, o.Force); err != nil {
			return nil, err
		}
	}
	out := []BanRecord{}
	seen := map[string]bool{}
	keep := func(a *Admin, bans []protect.Ban) {
		for _, r := range a.Records(bans) {
			id := fmt.Sprintf("%s\x00%s\x00%v", r.BanNamespace, r.Key, r.Range)
			if !seen[id] {
				seen[id] = true
				out = append(out, r)
			}
		}
	}
	if o.All {
		for _, a := range s.lists() {
			bans, err := a.LiftAll(ctx, o.By)
			keep(a, bans)
			if err != nil {
				return out, err
			}
		}
		return out, nil
	}
	for _, a := range s.admins {
		var bans []protect.Ban
		var err error
		if o.Force {
			bans, err = a.LiftWide(ctx, o.Targets, o.By)
		} else {
			bans, err = a.Lift(ctx, o.Targets, o.By)
		}
		keep(a, bans)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// Inspect reports target under every protector of the service. The
// record is the first protector's, with the key ban and range bans of
// every ban list the service has (the first key ban found, in the order
// of the protectors, when several lists hold one), and Protectors holds
// each protector's own record. plans are as for Admin.InspectPlans.
func (s *Service) Inspect(ctx context.Context, target string, plans map[string]*protect.Plan) (Inspection, error) {
	if len(s.admins) == 0 {
		return Inspection{}, fmt.Errorf("%w: the service has no protector", ErrUnknownNamespace)
	}
	each := make([]Inspection, 0, len(s.admins))
	for _, a := range s.admins {
		in, err := a.InspectPlans(ctx, target, plans)
		if err != nil {
			return Inspection{}, err
		}
		each = append(each, in)
	}
	top := each[0]
	seen := map[string]bool{}
	top.RangeBans = []BanRecord{}
	for _, in := range each {
		if top.Ban == nil && in.Ban != nil {
			top.Ban, top.Offenses = in.Ban, in.Offenses
		}
		for _, r := range in.RangeBans {
			if id := r.BanNamespace + "\x00" + r.Key; !seen[id] {
				seen[id] = true
				top.RangeBans = append(top.RangeBans, r)
			}
		}
	}
	top.Protectors = each
	return top, nil
}

// Explain explains a request to every protector of the service, in
// order, counting nothing. The record is that of the first protector that
// would refuse it (the first protector's when none would), and
// Protectors holds each protector's own.
func (s *Service) Explain(ctx context.Context, peer string, header map[string][]string) (Explanation, error) {
	if len(s.admins) == 0 {
		return Explanation{}, fmt.Errorf("%w: the service has no protector", ErrUnknownNamespace)
	}
	each := make([]Explanation, 0, len(s.admins))
	top := -1
	for i, a := range s.admins {
		ex, err := a.Explain(ctx, peer, header)
		if err != nil {
			return Explanation{}, err
		}
		if top < 0 && refuses(ex.Step) {
			top = i
		}
		each = append(each, ex)
	}
	out := each[max(top, 0)]
	out.Protectors = each
	return out, nil
}

// refuses reports whether a step refuses the request (in a dry run, it
// would).
func refuses(step string) bool {
	return step != StepAllowed && step != StepSafe
}

// Check reports every source that would refuse addr in the service, and
// whether the service passes it as safe first.
func (s *Service) Check(ctx context.Context, addr netip.Addr) (CheckReport, error) {
	if len(s.admins) == 0 {
		return CheckReport{}, fmt.Errorf("%w: the service has no protector", ErrUnknownNamespace)
	}
	rep := CheckReport{Addr: addr.Unmap().WithZone("").String(), Safe: true, SafeNetworks: []string{}, Sources: []CheckSource{}}
	seen := map[string]bool{}
	for _, a := range s.admins {
		c, err := a.Check(ctx, addr)
		if err != nil {
			return CheckReport{}, err
		}
		rep.Safe = rep.Safe && c.Safe
		rep.Refused = rep.Refused || c.Refused
		rep.SafeNetworks = appendNew(rep.SafeNetworks, c.SafeNetworks...)
		for _, src := range c.Sources {
			if id := src.Kind + "\x00" + src.List + "\x00" + src.Entry; !seen[id] {
				seen[id] = true
				rep.Sources = append(rep.Sources, src)
			}
		}
	}
	return rep, nil
}
