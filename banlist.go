package protect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/httpprotect/protect/internal/clientaddr"
	"github.com/httpprotect/protect/store"
)

// BanOptions describe a manual ban. The zero value asks for a ban of
// Config.BanDuration with reason "manual" and no author.
type BanOptions struct {
	// For is the ban's length. Zero means Config.BanDuration, unless
	// Permanent is set.
	For time.Duration
	// Permanent makes a ban that never expires. It is the only way to get
	// one: automatic bans always expire.
	Permanent bool
	// Reason is recorded with the ban and logged; "manual" when empty.
	// Ban refuses one longer than MaxReasonLen bytes (ErrReasonTooLong).
	Reason string
	// By names who added the ban, for the audit trail.
	By string
	// Force bans a CIDR wider than a /8 of IPv4 or a /16 of IPv6, which
	// Ban refuses otherwise (ErrWideTarget).
	Force bool
}

// ErrReasonTooLong is wrapped by the error of Ban for a reason longer
// than MaxReasonLen.
var ErrReasonTooLong = errors.New("protect: ban reason too long")

// ErrBadTarget is wrapped by the errors of Target and of the ban methods
// when a target is neither an address, a CIDR nor a consumer key.
var ErrBadTarget = errors.New("protect: bad target")

// ConsumerPrefix marks a target that names a consumer key rather than an
// address: "consumer:cus_alpha".
const ConsumerPrefix = "consumer:"

// Target returns the key a target names, aggregated as Verify counts: an
// address becomes its counting key ("2001:db8:1:2::99" →
// "2001:db8:1:2::/64"); a CIDR is a range, or a counting key when it is
// exactly one ("2001:db8:1:2::/64"); "consumer:NAME" is the consumer key
// Verify uses for NAME (or NAME itself when it is already a consumer key
// that is not verbatim: a hashed one, in lowercase, or "~" and an
// address, "consumer:~203.0.113.7" as listings show it). Anything else
// is an error wrapping ErrBadTarget: a typo must not ban or lift
// something nobody meant. So is a CIDR inside 6to4, NAT64 or Teredo whose
// clients Verify counts as the IPv4 addresses they embed: a ban on it
// would be listed and never hold. isRange reports a range ban target.
func (p *Protector) Target(s string) (k Key, isRange bool, err error) {
	t, err := p.target(s)
	return t.key, t.isRange, err
}

// target is what a target string names: its key, and the network it
// was written as when it was a CIDR (zero for an address or a consumer).
type target struct {
	key     Key
	isRange bool
	cidr    netip.Prefix
}

func (p *Protector) target(s string) (target, error) {
	if name, ok := strings.CutPrefix(s, ConsumerPrefix); ok {
		if name == "" {
			return target{}, fmt.Errorf("%w: %q names no consumer", ErrBadTarget, s)
		}
		if k, err := store.ParseKey(name); err == nil && k.Name != "" { // the key itself, as listings show it
			return target{key: k}, nil
		}
		return target{key: ConsumerKey(name)}, nil
	}
	pfx, err := store.ParsePrefix(s)
	if err != nil {
		return target{}, fmt.Errorf("%w: %w (want an address, a CIDR or consumer:NAME)", ErrBadTarget, err)
	}
	pfx = clientaddr.HostEntry(pfx) // 2002:c000:204::1 is the client 192.0.2.4, as Verify sees it
	a := pfx.Addr()
	if pfx.IsSingleIP() { // "1.2.3.4" and "1.2.3.4/32" alike
		if a.IsUnspecified() {
			return target{}, fmt.Errorf("%w: %q is the unspecified address", ErrBadTarget, s)
		}
		return target{key: p.agg.key(a)}, nil
	}
	if name, v4, ok := clientaddr.TunnelRange(pfx); ok {
		hint := "write the IPv4 range"
		if v4.IsValid() {
			hint = "did you mean " + v4.String() + "?"
		}
		return target{}, fmt.Errorf("%w: %q is inside %s, whose clients are counted as the IPv4 addresses they embed: no client resolves into it; %s", ErrBadTarget, s, name, hint)
	}
	if k := p.agg.key(a); k.Prefix == pfx {
		return target{key: k, cidr: pfx}, nil
	}
	return target{key: Key{Prefix: pfx}, isRange: true, cidr: pfx}, nil
}

// ErrWideTarget is wrapped by the errors of Ban and Lift for a CIDR wider
// than a /8 of IPv4 or a /16 of IPv6.
var ErrWideTarget = errors.New("protect: target too wide")

// The widest CIDRs that Ban and Lift take as they are. A /8 is a whole
// legacy IPv4 allocation, 16,777,216 addresses; a /16 of IPv6 is as wide
// as 2002::/16, all of 6to4. Anything wider — 0.0.0.0/0, ::/0,
// ::ffff:0:0/96 (every IPv4 address, written mapped), 2000::/3 — holds a
// large share of the internet, and is far more often a typo than a
// decision: banning it refuses nearly every client, lifting it lifts
// nearly every ban. So Ban needs BanOptions.Force for one, Lift refuses
// one (LiftWide takes it, LiftAll lifts everything), and protectctl asks
// for -force or -all.
const (
	widestIPv4 = 8
	widestIPv6 = 16
)

// checkWidth refuses a CIDR wider than widestIPv4 or widestIPv6 with an
// error that quotes it and says how much it covers.
func checkWidth(s string, cidr netip.Prefix, how string) error {
	family, widest := "IPv4", widestIPv4
	if cidr.Addr().Is6() {
		family, widest = "IPv6", widestIPv6
	}
	if !cidr.IsValid() || cidr.Bits() >= widest {
		return nil
	}
	share := "every " + family + " address"
	if cidr.Bits() > 0 {
		share = fmt.Sprintf("1/%d of all %s addresses", uint64(1)<<cidr.Bits(), family)
	}
	return fmt.Errorf("%w: %q covers %s, more than a /%d; %s", ErrWideTarget, s, share, widest, how)
}

// CheckTarget returns the error Ban and Lift would return for target
// before they reach the store: one wrapping ErrBadTarget when it names
// nothing, or ErrWideTarget when it is too wide and wide is false. It
// lets a caller refuse a list of targets before banning any of them.
func (p *Protector) CheckTarget(s string, wide bool) error {
	t, err := p.target(s)
	if err != nil || wide {
		return err
	}
	return checkWidth(s, t.cidr, "force it if you mean it (protectctl -force; BanOptions.Force, LiftWide), or lift every ban with lift -all")
}

// checkLoopback refuses a ban target whose key (an address's counted
// group) or range holds a loopback address: ::1.2.3.4 is counted under
// ::/64, which holds ::1, and 0.0.0.0/0 holds 127.0.0.0/8. Force does not
// override it: no operator's ban on it is ever meant. Ban itself leaves
// it to its callers (package admin refuses it), for a library's own
// tests and setups ban loopback clients.
func checkLoopback(s string, t target) error {
	pfx := t.key.Prefix
	if t.cidr.IsValid() {
		pfx = t.cidr
	}
	// A ban on these refuses the host's own proxies and health checks.
	loopback := [...]netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{127}), 8), netip.PrefixFrom(netip.IPv6Loopback(), 128)}
	for _, lo := range loopback {
		if pfx.IsValid() && pfx.Overlaps(lo) {
			return fmt.Errorf("%w: %q: a ban on %s covers the loopback network %s", ErrBadTarget, s, pfx.Masked(), lo)
		}
	}
	return nil
}

// CheckBanTarget returns the error an operator's ban on target meets
// before it reaches the store: CheckTarget's (force lets a wide CIDR
// pass), or one wrapping ErrBadTarget when what the ban would cover (an
// address's counted group, or the range) holds a loopback address
// (127.0.0.0/8, ::1), whatever force says. Package admin refuses every
// ban it is asked for that fails it.
func (p *Protector) CheckBanTarget(s string, force bool) error {
	if err := p.CheckTarget(s, force); err != nil {
		return err
	}
	t, _ := p.target(s)
	return checkLoopback(s, t)
}

// Ban adds a manual ban on target (an address, a CIDR or a consumer key,
// read by Target) and logs it. It takes effect on the next request to
// reach any instance sharing the store (within a second for ranges on a
// redisstore.Store).
//
// A CIDR wider than a /8 of IPv4 or a /16 of IPv6 is refused with
// ErrWideTarget unless opt.Force is set. A length longer than
// MaxDuration is refused; one under a millisecond, which the stores
// cannot keep, is a millisecond: only opt.Permanent makes a ban that
// never ends.
func (p *Protector) Ban(ctx context.Context, target string, opt BanOptions) (Ban, error) {
	t, err := p.target(target)
	if err != nil {
		return Ban{}, err
	}
	if !opt.Force {
		if err := checkWidth(target, t.cidr, "set BanOptions.Force (protectctl ban -force) if you mean it"); err != nil {
			return Ban{}, err
		}
	}
	length := opt.For
	switch {
	case opt.Permanent:
		length = 0
	case length < 0:
		return Ban{}, fmt.Errorf("protect: ban %s: negative length %v", target, length)
	case length > MaxDuration:
		return Ban{}, fmt.Errorf("protect: ban %s: length %v: longer than %v (ask for a permanent ban instead)", target, length, MaxDuration)
	case length == 0:
		length = p.lim.BanDuration
	case length < time.Millisecond:
		length = time.Millisecond
	}
	reason := opt.Reason
	switch {
	case reason == "":
		reason = "manual"
	case len(reason) > MaxReasonLen:
		return Ban{}, fmt.Errorf("%w: ban %s: a reason of %d bytes; at most %d", ErrReasonTooLong, target, len(reason), MaxReasonLen)
	}
	b := Ban{Key: t.key, Range: t.isRange, Reason: reason, Source: SourceManual, By: opt.By}
	b, err = p.space.AddBan(ctx, b, length)
	if err != nil {
		return Ban{}, fmt.Errorf("protect: ban %s: %w", t.key, err)
	}
	p.stats.stripe(0).manualBans.Add(1)
	p.logBan(ctx, "protect: ban added", b)
	return b, nil
}

// Lift removes the ban on target and logs it: an address lifts its
// counting key; a CIDR lifts every ban inside it, on keys and on ranges,
// itself included, even when it is exactly one counting key (lifting
// 2001:db8:1:2::/64 also lifts a ban on 2001:db8:1:2::/80); a consumer
// key lifts that consumer. It returns the bans it removed. A CIDR wider
// than a /8 of IPv4 or a /16 of IPv6 is refused with ErrWideTarget: use
// LiftWide, or LiftAll.
func (p *Protector) Lift(ctx context.Context, target string, by string) ([]Ban, error) {
	return p.lift(ctx, target, by, false)
}

// LiftWide is Lift for a CIDR of any width: LiftWide("0.0.0.0/0")
// lifts every ban on IPv4 keys and ranges.
func (p *Protector) LiftWide(ctx context.Context, target string, by string) ([]Ban, error) {
	return p.lift(ctx, target, by, true)
}

func (p *Protector) lift(ctx context.Context, target string, by string, wide bool) ([]Ban, error) {
	t, err := p.target(target)
	if err != nil {
		return nil, err
	}
	if !wide {
		if err := checkWidth(target, t.cidr, "lift every ban with LiftAll (protectctl lift -all), or this one with LiftWide (lift -force)"); err != nil {
			return nil, err
		}
	}
	if !t.cidr.IsValid() {
		return p.liftKeys(ctx, []Key{t.key}, by)
	}
	bans, err := p.Bans(ctx, BanFilter{Within: t.cidr})
	if err != nil {
		return nil, err
	}
	return p.liftBans(ctx, bans, by)
}

// LiftAll removes every ban in the protector's namespace.
func (p *Protector) LiftAll(ctx context.Context, by string) ([]Ban, error) {
	bans, err := p.Bans(ctx, BanFilter{})
	if err != nil {
		return nil, err
	}
	return p.liftBans(ctx, bans, by)
}

// liftBans lifts bans that a listing found: key bans a page at a time
// where the store can (one round trip per page on Redis), ranges one by
// one.
func (p *Protector) liftBans(ctx context.Context, bans []Ban, by string) ([]Ban, error) {
	ps, paged := p.raw.(store.BanPager)
	var keys, keyBans []Key
	for _, b := range bans {
		if paged && !b.Range {
			keyBans = append(keyBans, b.Key)
		} else {
			keys = append(keys, b.Key)
		}
	}
	lifted := []Ban{}
	if len(keyBans) > 0 {
		got, err := ps.LiftBans(ctx, keyBans, p.pageTimeout())
		for _, b := range got {
			p.noteLift(ctx, b, by)
		}
		lifted = append(lifted, got...)
		if err != nil {
			return lifted, fmt.Errorf("protect: lift: %w", err)
		}
	}
	more, err := p.liftKeys(ctx, keys, by)
	return append(lifted, more...), err
}

func (p *Protector) liftKeys(ctx context.Context, keys []Key, by string) ([]Ban, error) {
	lifted := []Ban{}
	for _, k := range keys {
		b, ok, err := p.space.Lift(ctx, k)
		if err != nil {
			return lifted, fmt.Errorf("protect: lift %s: %w", k, err)
		}
		if ok {
			if b.Range {
				p.liftEscalation(ctx, k)
			}
			lifted = append(lifted, b)
			p.noteLift(ctx, b, by)
		}
	}
	return lifted, nil
}

// noteLift counts and logs one lifted ban.
func (p *Protector) noteLift(ctx context.Context, b Ban, by string) {
	p.stats.stripe(0).lifted.Add(1)
	if b.Malformed != "" {
		p.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "protect: malformed ban record lifted",
			slog.String("key", b.Key.String()), slog.String("malformed", b.Malformed),
			slog.String("by", by), slog.String("namespace", p.cfg.Namespace))
		return
	}
	p.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "protect: ban lifted",
		slog.String("key", b.Key.String()), slog.String("reason", b.Reason),
		slog.String("length", banLengthText(b)), slog.String("source", string(b.Source)),
		slog.String("by", by), slog.String("namespace", p.cfg.Namespace))
}

// Bans lists the active bans in the protector's namespace that f selects,
// soonest expiry first and permanent bans last. An empty list is empty,
// never nil. On a store outside this process each page of the listing
// (about a thousand bans on Redis) has its own StoreTimeout; ctx bounds
// the whole.
func (p *Protector) Bans(ctx context.Context, f BanFilter) ([]Ban, error) {
	var (
		bans []Ban
		err  error
	)
	if ps, ok := p.raw.(store.BanPager); ok {
		bans, err = ps.BansPaged(ctx, f, p.pageTimeout())
	} else {
		bans, err = p.space.Bans(ctx, f)
	}
	if err != nil {
		return nil, fmt.Errorf("protect: list bans: %w", err)
	}
	if bans == nil {
		bans = []Ban{}
	}
	SortBans(bans)
	return bans, nil
}

// pageTimeout is the deadline of each page of a paged listing or lift:
// StoreTimeout for a store outside this process, none for a local one.
func (p *Protector) pageTimeout() time.Duration {
	if p.guard == nil {
		return 0
	}
	return p.cfg.StoreTimeout
}

// SortBans orders bans soonest expiry first, permanent bans next, then
// the records a store could not read (Ban.Malformed), each group by key.
func SortBans(bans []Ban) {
	slices.SortFunc(bans, func(a, b Ban) int {
		if c := cmp.Compare(banRank(a), banRank(b)); c != 0 {
			return c
		}
		if c := a.Expires.Compare(b.Expires); c != 0 {
			return c
		}
		return compareKeys(a.Key, b.Key)
	})
}

// banRank is a ban's group in a listing: 0 ends, 1 is permanent, 2 is
// damaged.
func banRank(b Ban) int {
	switch {
	case b.Malformed != "":
		return 2
	case b.Permanent():
		return 1
	}
	return 0
}

func compareKeys(a, b Key) int {
	if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
		return c
	}
	if a.Prefix.Bits() != b.Prefix.Bits() {
		return a.Prefix.Bits() - b.Prefix.Bits()
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}

// banLengthText is a ban's full length for the log: "1h0m0s", "permanent".
func banLengthText(b Ban) string {
	if b.Permanent() {
		return "permanent"
	}
	return b.Expires.Sub(b.Created).String()
}

// logBan writes one ban event with key, reason and length.
func (p *Protector) logBan(ctx context.Context, msg string, b Ban) {
	p.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, msg,
		slog.String("key", b.Key.String()), slog.String("reason", b.Reason),
		slog.String("length", banLengthText(b)), slog.String("source", string(b.Source)),
		slog.Int("offense", b.Offense), slog.String("by", b.By),
		slog.String("namespace", p.cfg.Namespace))
}
