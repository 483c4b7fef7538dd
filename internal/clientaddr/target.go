package clientaddr

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/httpprotect/protect/store"
)

// ErrBadTarget is wrapped by the errors of ParseTarget, and so of the ban
// methods, when a target is neither an address, a CIDR nor a consumer key.
var ErrBadTarget = errors.New("protect: bad target")

// ConsumerPrefix marks a target that names a consumer key rather than an
// address: "consumer:cus_alpha".
const ConsumerPrefix = "consumer:"

// A Target is what a target string names: its key, whether that is a
// range, and the network it was written as when it was a CIDR (zero for
// an address or a consumer). The zero Target names nothing.
type Target struct {
	Key     store.Key
	IsRange bool
	CIDR    netip.Prefix
}

// ParseTarget returns what a target names: its key,, aggregated as Verify counts: an
// address becomes its counting key ("2001:db8:1:2::99" →
// "2001:db8:1:2::/64"); a CIDR is a range, or a counting key when it is
// exactly one ("2001:db8:1:2::/64"); "consumer:NAME" is the consumer key
// Verify uses for NAME (or NAME itself when it is already a consumer key
// that is not verbatim: a hashed one, in lowercase, or "~" and an
// address, "consumer:~203.0.113.7" as listings show it). Anything else
// is an error wrapping ErrBadTarget: a typo must not ban or lift
// something nobody meant. So is a CIDR inside 6to4, NAT64 or Teredo whose
// clients Verify counts as the IPv4 addresses they embed: a ban on it
// would be listed and never hold.
func ParseTarget(s string, agg Aggregator) (Target, error) {
	if name, ok := strings.CutPrefix(s, ConsumerPrefix); ok {
		if name == "" {
			return Target{}, fmt.Errorf("%w: %q names no consumer", ErrBadTarget, s)
		}
		if k, err := store.ParseKey(name); err == nil && k.Name != "" { // the key itself, as listings show it
			return Target{Key: k}, nil
		}
		return Target{Key: store.ConsumerKey(name)}, nil
	}
	pfx, err := store.ParsePrefix(s)
	if err != nil {
		return Target{}, fmt.Errorf("%w: %w (want an address, a CIDR or consumer:NAME)", ErrBadTarget, err)
	}
	pfx = HostEntry(pfx) // 2002:c000:204::1 is the client 192.0.2.4, as Verify sees it
	a := pfx.Addr()
	if pfx.IsSingleIP() { // "1.2.3.4" and "1.2.3.4/32" alike
		if a.IsUnspecified() {
			return Target{}, fmt.Errorf("%w: %q is the unspecified address", ErrBadTarget, s)
		}
		return Target{Key: agg.Key(a)}, nil
	}
	if name, v4, ok := TunnelRange(pfx); ok {
		hint := "write the IPv4 range"
		if v4.IsValid() {
			hint = "did you mean " + v4.String() + "?"
		}
		return Target{}, fmt.Errorf("%w: %q is inside %s, whose clients are counted as the IPv4 addresses they embed: no client resolves into it; %s", ErrBadTarget, s, name, hint)
	}
	if k := agg.Key(a); k.Prefix == pfx {
		return Target{Key: k, CIDR: pfx}, nil
	}
	return Target{Key: store.Key{Prefix: pfx}, IsRange: true, CIDR: pfx}, nil
}

// ErrWideTarget is wrapped by the errors of Ban and admin.Admin.Lift for
// a CIDR wider than a /8 of IPv4 or a /16 of IPv6.
var ErrWideTarget = errors.New("protect: target too wide")

// The widest CIDRs that Ban and admin.Admin.Lift take as they are. A /8 is a whole
// legacy IPv4 allocation, 16,777,216 addresses; a /16 of IPv6 is as wide
// as 2002::/16, all of 6to4. Anything wider — 0.0.0.0/0, ::/0,
// ::ffff:0:0/96 (every IPv4 address, written mapped), 2000::/3 — holds a
// large share of the internet, and is far more often a typo than a
// decision: banning it refuses nearly every client, lifting it lifts
// nearly every ban. So Ban needs BanOptions.Force for one, admin.Admin.Lift
// refuses one (LiftWide takes it, LiftAll lifts everything; Protector.Lift
// takes any width), and protectctl asks for -force or -all.
const (
	widestIPv4 = 8
	widestIPv6 = 16
)

// CheckWidth refuses a CIDR wider than widestIPv4 or widestIPv6 with an
// error that quotes it and says how much it covers.
func CheckWidth(s string, cidr netip.Prefix, how string) error {
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

// CheckLoopback refuses a ban target whose key (an address's counted
// group) or range holds a loopback address: ::1.2.3.4 is counted under
// ::/64, which holds ::1, and 0.0.0.0/0 holds 127.0.0.0/8. Force does not
// override it: no operator's ban on it is ever meant. Ban itself leaves
// it to its callers (package admin refuses it), for a library's own
// tests and setups ban loopback clients.
func CheckLoopback(s string, t Target) error {
	pfx := t.Key.Prefix
	if t.CIDR.IsValid() {
		pfx = t.CIDR
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
