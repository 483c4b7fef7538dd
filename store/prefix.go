package store

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParsePrefix parses one network as protect writes it in keys, lists and
// settings: "10.0.0.0/8", "192.0.2.15" (a single host), "2001:db8::/32",
// "::ffff:10.0.0.0/104" (returned as 10.0.0.0/8). Host bits set under the
// mask are an error: "10.0.0.1/8" is more likely a typo than a wish to
// name 10.0.0.0/8. Zones are refused; so is an empty entry.
func ParsePrefix(s string) (netip.Prefix, error) {
	e := strings.TrimSpace(s)
	if e == "" {
		return netip.Prefix{}, fmt.Errorf("entry %q: empty", s)
	}
	if !strings.Contains(e, "/") {
		a, err := netip.ParseAddr(e)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("entry %q: not an address or CIDR", s)
		}
		if a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("entry %q: zones are not allowed", s)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(e)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("entry %q: not a valid CIDR (want address/bits, e.g. 10.0.0.0/8)", s)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("entry %q: host bits set; did you mean %s?", s, p.Masked())
	}
	return UnmapPrefix(p), nil
}

// UnmapPrefix turns "::ffff:10.0.0.0/104" into "10.0.0.0/8". A mapped
// prefix shorter than /96 reaches outside the mapped range and is left as
// it is.
func UnmapPrefix(p netip.Prefix) netip.Prefix {
	a := p.Addr()
	if !a.Is4In6() || p.Bits() < 96 {
		return p
	}
	return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
}
