package protect

import (
	"fmt"
	"net/netip"
	"strings"

	"go4.org/netipx"
)

// A netList is an immutable set of networks: safe networks, trusted proxies.
// The zero value is empty and contains nothing.
//
// Entries are stored unmapped, and every lookup is made with an unmapped
// address, so "::ffff:10.0.0.1" and "10.0.0.1" are the same host here. This
// is the whole defence against the ::ffff: mismatch that lets a health check
// escape a safe list or a client escape a ban.
type netList struct {
	set *netipx.IPSet // nil when empty
}

// parseNetList builds a list from CIDRs and bare addresses. A bare address
// is a single host (/32 or /128). Nested and overlapping entries are fine:
// the set is their union. The error names the setting and quotes the entry.
func parseNetList(setting string, entries []string) (netList, error) {
	if len(entries) == 0 {
		return netList{}, nil
	}
	var b netipx.IPSetBuilder
	for _, e := range entries {
		p, err := parseNetEntry(e)
		if err != nil {
			return netList{}, &ConfigError{Field: setting, Reason: err.Error(), Err: err}
		}
		b.AddPrefix(hostEntry(p))
	}
	set, err := b.IPSet()
	if err != nil {
		return netList{}, &ConfigError{Field: setting, Reason: err.Error(), Err: err}
	}
	return netList{set: set}, nil
}

// parseNetEntry parses one list entry: "10.0.0.0/8", "192.0.2.15",
// "2001:db8::/32", "::ffff:10.0.0.0/104" (stored as 10.0.0.0/8).
// Host bits set under the mask are an error: "10.0.0.1/8" is more likely a
// typo than a wish to list 10.0.0.0/8.
func parseNetEntry(s string) (netip.Prefix, error) {
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
	return unmapPrefix(p), nil
}

// unmapPrefix turns "::ffff:10.0.0.0/104" into "10.0.0.0/8". A mapped prefix
// shorter than /96 reaches outside the mapped range and is left as it is.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	a := p.Addr()
	if !a.Is4In6() || p.Bits() < 96 {
		return p
	}
	return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
}

// contains reports whether a (already unmapped) is in the list.
func (l netList) contains(a netip.Addr) bool {
	return l.set != nil && l.set.Contains(a)
}

// empty reports whether the list holds nothing.
func (l netList) empty() bool { return l.set == nil }
