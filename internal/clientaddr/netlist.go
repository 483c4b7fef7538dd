package clientaddr

import (
	"net/netip"

	"github.com/httpprotect/protect/store"
	"go4.org/netipx"
)

// A NetList is an immutable set of networks: safe networks, trusted proxies.
// The zero value is empty and contains nothing.
//
// Entries are stored unmapped, and every lookup is made with an unmapped
// address, so "::ffff:10.0.0.1" and "10.0.0.1" are the same host here. This
// is the whole defence against the ::ffff: mismatch that lets a health check
// escape a safe list or a client escape a ban.
type NetList struct {
	set *netipx.IPSet // nil when empty
}

// ParseNetList builds a list from CIDRs and bare addresses. A bare address
// is a single host (/32 or /128). Nested and overlapping entries are fine:
// the set is their union. The error quotes the entry.
func ParseNetList(entries []string) (NetList, error) {
	if len(entries) == 0 {
		return NetList{}, nil
	}
	var b netipx.IPSetBuilder
	for _, e := range entries {
		p, err := store.ParsePrefix(e)
		if err != nil {
			return NetList{}, err
		}
		b.AddPrefix(HostEntry(p))
	}
	set, err := b.IPSet()
	if err != nil {
		return NetList{}, err
	}
	return NetList{set: set}, nil
}

// Contains reports whether a (already unmapped) is in the list.
func (l NetList) Contains(a netip.Addr) bool {
	return l.set != nil && l.set.Contains(a)
}

// Empty reports whether the list holds nothing.
func (l NetList) Empty() bool { return l.set == nil }
