package protect

import (
	"context"
	"log/slog"
	"net/netip"
	"strconv"

	"github.com/httpprotect/protect/store"
)

// Prefix escalation: a client that holds many counting keys (an IPv6 /48
// holds 65,536 /64s) walks away from each ban to the next key. When
// EscalationThreshold keys inside one wider prefix have been banned, the
// wider prefix is banned as a range; when as many of those ranges inside
// a still wider prefix have been banned, that one is, and so on up the
// configured lengths.
//
// It runs through the store seam alone, so it works on every store and on
// Redis Cluster: a second Space, under the ban namespace with the suffix
// escalationSuffix, counts the bans inside each wider prefix. That Space's
// BanLimit is the threshold less one, so the Take that makes a prefix's
// count reach the threshold is the one that bans it there, atomically
// (counter deleted, offense recorded, a length escalating by BanDuration
// and BanFactor as for keys); the Protector then writes that ban, with
// that length, as a range ban where Verify reads bans. The counter's TTL
// is OffenseWindow, renewed by each counted ban. The Space's own ban on
// the prefix stops the counting while the range ban holds; a lift of the
// range lifts it too. Nothing of this runs on a request that wrote no new
// ban, so Verify's hot path is untouched.

// escalationSuffix follows the ban namespace in the escalation Space's
// namespace. It cannot meet a client's keys: those start with '{' after
// the namespace.
const escalationSuffix = "escalate:"

// DefaultEscalationThreshold is the number of bans inside one wider
// prefix that bans the prefix.
const DefaultEscalationThreshold = 3

// defaultIPv6Escalation are the lengths IPv6 escalates through: a /56 is
// what many providers give one subscriber, a /48 one site (RIPE-690).
var defaultIPv6Escalation = []int{56, 48}

// The shortest prefixes escalation may ban: a whole provider's allocation
// (an IPv6 /32, an IPv4 /16) is too many innocent neighbours for a ban
// nobody asked for.
const (
	minIPv6Escalation = 32
	minIPv4Escalation = 16
)

// escalation is a Protector's prefix escalation; nil when off.
type escalation struct {
	space     store.Space
	threshold int
	v4, v6    []int // the wider lengths, longest first
}

// escalationDefaults checks and completes the escalation fields of c,
// whose prefix lengths are already complete. It reports the IPv6 lengths'
// problem, or else the IPv4 lengths'.
func (c *Config) escalationDefaults() []error {
	if c.EscalationThreshold == 0 {
		c.EscalationThreshold = DefaultEscalationThreshold
	}
	if c.IPv6Escalation == nil {
		for _, l := range defaultIPv6Escalation {
			if l < c.IPv6Prefix {
				c.IPv6Escalation = append(c.IPv6Escalation, l)
			}
		}
	}
	if err := checkLevels("IPv6Escalation", c.IPv6Escalation, "IPv6Prefix", c.IPv6Prefix, minIPv6Escalation); err != nil {
		return []error{err}
	}
	if err := checkLevels("IPv4Escalation", c.IPv4Escalation, "IPv4Prefix", c.IPv4Prefix, minIPv4Escalation); err != nil {
		return []error{err}
	}
	return nil
}

// checkLevels reports escalation lengths that are not strictly shorter,
// one after the other, than the counting prefix, or are shorter than min.
func checkLevels(name string, levels []int, prefixName string, prefix, least int) error {
	last := prefix
	for _, l := range levels {
		switch {
		case l >= last:
			return fieldErr(name, levels, "each length must be shorter than %s %d and than the one before it", prefixName, prefix)
		case l < least:
			return fieldErr(name, levels, "/%d is shorter than /%d, too wide a range to ban automatically", l, least)
		}
		last = l
	}
	return nil
}

// newEscalation binds the escalation Space of a Protector, or returns nil
// when escalation is off (a negative threshold, no lengths, or DryRun,
// whose bans must never reach a live protector's list).
func (p *Protector) newEscalation() (*escalation, error) {
	c := &p.cfg
	if c.EscalationThreshold < 0 || c.DryRun || len(c.IPv4Escalation)+len(c.IPv6Escalation) == 0 {
		return nil, nil
	}
	lim := p.lim
	lim.TTL = lim.OffenseWindow
	lim.BanLimit = int64(c.EscalationThreshold - 1)
	lim.BanReason = "escalation"
	// The escalation Space's bans and offenses live with the ban list
	// (BanNamespace), so that a lift by any protector of that list, such
	// as protectctl, lets the range escalate again, and a range's offenses
	// are the list's. Its counters stay under this protector's Namespace,
	// whose Limits they derive from: protectors of one ban list may differ
	// in BanDuration or OffenseWindow, and a store binds one namespace to
	// one set of Limits. So bans written by two protectors with different
	// Namespaces do not add up towards one wider prefix.
	scope := store.Scope{Namespace: p.cfg.Namespace + escalationSuffix, BanNamespace: c.BanNamespace + escalationSuffix, Limits: lim}
	sp, err := p.store.Space(scope)
	if err != nil {
		return nil, err
	}
	return &escalation{space: p.guardSpace(sp, scope, false), threshold: c.EscalationThreshold, v4: c.IPv4Escalation, v6: c.IPv6Escalation}, nil
}

// escalate counts the new automatic ban b towards the wider prefixes
// around it, and bans each one that reaches the threshold. Only a key's
// first ban within the offense window counts: its repeat bans lengthen
// its own, and must not turn one noisy /64 into a banned /56.
func (p *Protector) escalate(ctx context.Context, b *Ban) {
	e := p.esc
	if e == nil || b.Source != SourceAuto || b.Offense != 1 || !b.Key.Prefix.IsValid() {
		return
	}
	levels := e.v6
	if b.Key.Prefix.Addr().Is4() {
		levels = e.v4
	}
	// The client may hang up; the ban it earned is still counted.
	ctx = context.WithoutCancel(ctx)
	from := b.Key.Prefix
	for _, bits := range levels {
		wider, _ := from.Addr().Prefix(bits)
		res, err := e.space.Take(ctx, Key{Prefix: wider}, netip.Addr{}, 1)
		if err != nil {
			p.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "protect: escalation skipped",
				slog.String("key", b.Key.String()), slog.String("range", wider.String()),
				slog.String("namespace", p.cfg.Namespace), slog.Any("error", err))
			return
		}
		if !res.NewBan {
			return
		}
		reason := strconv.Itoa(e.threshold) + " /" + strconv.Itoa(from.Bits()) + " bans inside " + wider.String()
		if res.Ban.Offense > 1 {
			reason += ", offense " + strconv.Itoa(res.Ban.Offense)
		}
		rb := Ban{Key: Key{Prefix: wider}, Range: true, Reason: reason, Source: SourceAuto}
		stored, err := p.space.AddBan(ctx, rb, res.Ban.Expires.Sub(res.Ban.Created))
		if err != nil {
			p.cfg.Logger.LogAttrs(ctx, slog.LevelError, "protect: escalation ban failed",
				slog.String("key", wider.String()), slog.String("reason", reason),
				slog.String("namespace", p.cfg.Namespace), slog.Any("error", err))
			return
		}
		p.stats.stripe(0).autoBans.Add(1)
		p.logBan(ctx, "protect: ban added", stored)
		if res.Ban.Offense > 1 {
			return // a range banned again counts towards nothing wider
		}
		from = wider
	}
}

// liftEscalation lets a lifted range escalate again: it lifts the
// escalation Space's ban on k, which would otherwise stop the counting
// until the lifted ban would have ended.
func (p *Protector) liftEscalation(ctx context.Context, k Key) {
	if p.esc == nil || !k.Prefix.IsValid() {
		return
	}
	p.esc.space.Lift(ctx, k) // best effort: the range itself is lifted
}
