// Package nftsink keeps nftables sets equal to protect's bans in force,
// for protectd and protectctl.
//
// The operator owns the table, the sets and the chain that drops what
// they hold; the sink owns the sets' contents. Each set is an interval set
// with timeouts (type ipv4_addr or ipv6_addr, flags interval, timeout):
// every ban is one range element whose timeout is the ban's time left, so
// that the kernel lifts an expired ban by itself, whether protectd runs or
// not. The sink never flushes or deletes a set: stopping it leaves the
// kernel enforcing what it last wrote until each element's timeout, and a
// start compares the kernel's elements with the bans and changes only
// what differs, in one netlink transaction, so a restart opens no gap.
//
// The elements never overlap (the kernel refuses overlapping intervals,
// and protect's CIDR bans nest): a ban inside another that outlives it is
// left out, and a ban that outlives the range around it cuts that range
// in pieces around itself, so that every address is held for as long as
// its longest ban.
package nftsink

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"github.com/httpprotect/protect"
)

// An Element is one interval of a set: the addresses First to Last, held
// until Expires (zero: permanent). The zero Element holds nothing.
type Element struct {
	First, Last netip.Addr
	Expires     time.Time
}

// outlives reports whether an expiry a ends after b; zero is never.
func outlives(a, b time.Time) bool {
	switch {
	case a.IsZero():
		return !b.IsZero()
	case b.IsZero():
		return false
	}
	return a.After(b)
}

// node is one ban's prefix in the forest of nested prefixes.
type node struct {
	pfx      netip.Prefix
	expires  time.Time
	children []*node
}

// Elements returns the overlap-free elements that hold the address bans
// among bans, IPv4 and IPv6 apart, each sorted by address. Consumer bans
// have no address and are left out; so are bans over at now.
func Elements(bans []protect.Ban, now time.Time) (v4, v6 []Element) {
	var p4, p6 []node
	for _, b := range bans {
		p := b.Key.Prefix
		if !p.IsValid() || (!b.Permanent() && !b.Expires.After(now)) {
			continue
		}
		n := node{pfx: p.Masked(), expires: b.Expires}
		if n.pfx.Addr().Is4() {
			p4 = append(p4, n)
		} else {
			p6 = append(p6, n)
		}
	}
	return elements(p4), elements(p6)
}

// elements builds the forest of ns (one family) and cuts it into
// disjoint elements.
func elements(ns []node) []Element {
	if len(ns) == 0 {
		return nil
	}
	// By first address, the wider prefix first: a prefix then precedes
	// every prefix inside it, and those follow it without a gap.
	slices.SortFunc(ns, func(a, b node) int {
		if c := a.pfx.Addr().Compare(b.pfx.Addr()); c != 0 {
			return c
		}
		return cmp.Compare(a.pfx.Bits(), b.pfx.Bits())
	})
	var roots []*node
	var stack []*node
	for i := range ns {
		n := &ns[i]
		for len(stack) > 0 && !stack[len(stack)-1].pfx.Contains(n.pfx.Addr()) {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].pfx == n.pfx {
			// The same prefix twice (a key ban and a range ban): the longer wins.
			top := stack[len(stack)-1]
			if outlives(n.expires, top.expires) {
				top.expires = n.expires
			}
			continue
		}
		if len(stack) == 0 {
			roots = append(roots, n)
		} else {
			stack[len(stack)-1].children = append(stack[len(stack)-1].children, n)
		}
		stack = append(stack, n)
	}
	var out []Element
	for _, r := range roots {
		out = cut(r, time.Time{}, true, out)
	}
	slices.SortFunc(out, func(a, b Element) int { return a.First.Compare(b.First) })
	return out
}

// cut appends the elements of n's subtree to out, where the bans around
// n hold until held (any when top). It returns out with them; the
// elements of the subtree's kept bans stand in n's place.
func cut(n *node, held time.Time, top bool, out []Element) []Element {
	if !top && !outlives(n.expires, held) {
		// A ban around n holds at least as long: n adds nothing, but a
		// ban inside n may outlive both.
		for _, c := range n.children {
			out = cut(c, held, false, out)
		}
		return out
	}
	start := len(out)
	for _, c := range n.children {
		out = cut(c, n.expires, false, out)
	}
	// The kept bans inside n, in address order, are holes in n's range.
	holes := slices.Clone(out[start:])
	slices.SortFunc(holes, func(a, b Element) int { return a.First.Compare(b.First) })
	next, last := n.pfx.Addr(), lastAddr(n.pfx)
	for _, h := range holes {
		if next.Less(h.First) {
			out = append(out, Element{First: next, Last: h.First.Prev(), Expires: n.expires})
		}
		next = h.Last.Next()
		if !next.IsValid() { // a hole at the end of the address space
			return out
		}
	}
	if !last.Less(next) {
		out = append(out, Element{First: next, Last: last, Expires: n.expires})
	}
	return out
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
