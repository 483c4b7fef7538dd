package protect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// ErrBadTarget is wrapped by the errors of the ban methods when a target
// is neither an address, a CIDR nor a consumer key.
var ErrBadTarget = clientaddr.ErrBadTarget

// ErrWideTarget is wrapped by the error of Ban, and of package admin's
// lifts, for a CIDR wider than a /8 of IPv4 or a /16 of IPv6.
var ErrWideTarget = clientaddr.ErrWideTarget

// ConsumerPrefix marks a target that names a consumer key rather than an
// address: "consumer:cus_alpha".
const ConsumerPrefix = clientaddr.ConsumerPrefix

// Ban adds a manual ban on target (an address, a CIDR or a consumer key,
// aggregated as Verify counts it) and logs it. It takes effect on the next request to
// reach any instance sharing the store (within a second for ranges on a
// redisstore.Store).
//
// A CIDR wider than a /8 of IPv4 or a /16 of IPv6 is refused with
// ErrWideTarget unless opt.Force is set. A length longer than
// MaxDuration is refused; one under a millisecond, which the stores
// cannot keep, is a millisecond: only opt.Permanent makes a ban that
// never ends.
func (p *Protector) Ban(ctx context.Context, target string, opt BanOptions) (Ban, error) {
	t, err := clientaddr.ParseTarget(target, p.agg)
	if err != nil {
		return Ban{}, err
	}
	if !opt.Force {
		if err := clientaddr.CheckWidth(target, t.CIDR, "set BanOptions.Force (protectctl ban -force) if you mean it"); err != nil {
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
	b := Ban{Key: t.Key, Range: t.IsRange, Reason: reason, Source: SourceManual, By: opt.By}
	b, err = p.space.AddBan(ctx, b, length)
	if err != nil {
		return Ban{}, fmt.Errorf("protect: ban %s: %w", t.Key, err)
	}
	p.stats.stripe(0).manualBans.Add(1)
	p.logBan(ctx, "protect: ban added", b)
	return b, nil
}

// Lift removes the ban on target and logs it: an address lifts its
// counting key; a CIDR lifts every ban inside it, on keys and on ranges,
// itself included, even when it is exactly one counting key (lifting
// 2001:db8:1:2::/64 also lifts a ban on 2001:db8:1:2::/80); a consumer
// key lifts that consumer. It returns the bans it removed.
//
// A CIDR of any width is taken: Lift("0.0.0.0/0") lifts every ban on
// IPv4 keys and ranges, Lift("::/0") every one on IPv6. Refusing a wide
// CIDR that an operator may have mistyped is package admin's (Admin.Lift,
// with Admin.LiftWide and Admin.LiftAll beside it), as is listing bans.
func (p *Protector) Lift(ctx context.Context, target string, by string) ([]Ban, error) {
	t, err := clientaddr.ParseTarget(target, p.agg)
	if err != nil {
		return nil, err
	}
	if !t.CIDR.IsValid() {
		return p.liftKeys(ctx, []Key{t.Key}, by)
	}
	bans, err := p.bans(ctx, BanFilter{Within: t.CIDR})
	if err != nil {
		return nil, err
	}
	return p.liftBans(ctx, bans, by)
}

// liftBans lifts bans that a listing found: key bans a page at a time
// where the store can (one round trip per page on Redis), ranges one by
// one.
func (p *Protector) liftBans(ctx context.Context, bans []Ban, by string) ([]Ban, error) {
	ps, paged := p.raw.(store.BanPager) // its pages have their own deadlines
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

// bans lists the active bans in the protector's namespace that f
// selects, for Lift: store.ListBans, a page at a time where the store can
// (each page with its own deadline), else in one call behind the guard.
func (p *Protector) bans(ctx context.Context, f BanFilter) ([]Ban, error) {
	sp := p.space
	if _, ok := p.raw.(store.BanPager); ok {
		sp = p.raw
	}
	bans, err := store.ListBans(ctx, sp, f, p.pageTimeout())
	if err != nil {
		return nil, fmt.Errorf("protect: list bans: %w", err)
	}
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
