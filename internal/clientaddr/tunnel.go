package clientaddr

import (
	"encoding/binary"
	"net/netip"
)

// Three kinds of IPv6 address carry the IPv4 address of the host behind
// them, and normalize counts them as that IPv4 address:
//
//   - 6to4, 2002:AABB:CCDD::/48: a host with the public IPv4 address
//     A.B.C.D owns the whole /48 (65,536 /64s to rotate through). Its
//     traffic returns through a 6to4 relay to A.B.C.D, so only that host
//     can complete a handshake from the /48: it is the host.
//   - NAT64/SIIT, 64:ff9b::/96 (RFC 6052): an IPv4 client A.B.C.D reaching
//     an IPv6-only service through a translator arrives as 64:ff9b::A.B.C.D.
//     Left as IPv6, every IPv4 client of the translator would share one /64
//     key: one counter and one ban for all of them.
//   - Teredo, 2001::/32 (RFC 4380): 2001:0:SSSS:SSSS:flags:port:CCCC:CCCC,
//     where S is the Teredo server (shared by all its clients) and C the
//     client's public IPv4 address, bit-inverted. Traffic returns by UDP to
//     that address, so it is as much the client as any IPv4 address is;
//     the server's part is not, and left as IPv6 the /64 key would put every
//     client of one server in one bucket.
//
// The embedded address is believed only when it is global unicast and not
// private (see embeddedGlobal): those are the only addresses these
// mechanisms may carry, and a private one could otherwise pose as a
// trusted proxy or a safe network.

// embeddedIPv4 returns the IPv4 address an unmapped IPv6 address a
// embeds by 6to4, NAT64 or Teredo, or a itself. It does not allocate:
// normalize calls it for every IPv6 client.
func embeddedIPv4(a netip.Addr) netip.Addr {
	b := a.As16()
	hi := binary.BigEndian.Uint64(b[:8])
	var v4 [4]byte
	switch {
	case hi>>48 == 0x2002: // 6to4: bits 16–47
		binary.BigEndian.PutUint32(v4[:], uint32(hi>>16))
	case hi == 0x0064_ff9b_0000_0000 && binary.BigEndian.Uint32(b[8:12]) == 0: // NAT64: bits 96–127
		copy(v4[:], b[12:])
	case hi>>32 == 0x2001_0000: // Teredo: bits 96–127, inverted
		binary.BigEndian.PutUint32(v4[:], ^binary.BigEndian.Uint32(b[12:]))
	default:
		return a
	}
	if v := netip.AddrFrom4(v4); embeddedGlobal(v) {
		return v
	}
	return a
}

// sharedSpace is 100.64.0.0/10, the carrier-grade NAT space (RFC 6598):
// not an address of one host on the internet.
var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

// embeddedGlobal reports whether an IPv4 address taken from inside an IPv6
// one may stand for the client: a global unicast address, not private, not
// in 0.0.0.0/8 and not carrier-grade NAT space.
func embeddedGlobal(v netip.Addr) bool {
	return v.IsGlobalUnicast() && !v.IsPrivate() && v.As4()[0] != 0 && !sharedSpace.Contains(v)
}

// HostEntry maps a list entry or a target that is one IPv6 address
// embedding an IPv4 host to that host, as normalize maps the client: a
// safe network, a trusted proxy or a ban written as 2002:c000:204::1 means
// the client that address resolves to, 192.0.2.4. Wider prefixes are left
// as written: a 6to4 /40 is a /24 of IPv4 hosts, and guessing which an
// operator meant could make a whole family safe.
func HostEntry(p netip.Prefix) netip.Prefix {
	if !p.IsSingleIP() || !p.Addr().Is6() {
		return p
	}
	a := embeddedIPv4(p.Addr())
	return netip.PrefixFrom(a, a.BitLen())
}

// TunnelRange reports whether the IPv6 CIDR p lies inside 6to4, NAT64 or
// Teredo and holds clients that normalize counts as IPv4 addresses: a
// ban on it would be listed and never hold, as no client resolves into
// it. It returns the tunnel's name and, where the embedded bits are
// plain (6to4, NAT64), the IPv4 range the operator meant; invalid for
// Teredo (its client bits are inverted and follow the server's).
func TunnelRange(p netip.Prefix) (name string, v4 netip.Prefix, ok bool) {
	if !p.Addr().Is6() {
		return "", netip.Prefix{}, false
	}
	b := p.Addr().As16()
	switch {
	case sixToFour.Overlaps(p) && p.Bits() >= sixToFour.Bits():
		name = "6to4"
		v4 = netip.PrefixFrom(netip.AddrFrom4([4]byte(b[2:6])), min(p.Bits()-16, 32))
	case nat64.Overlaps(p) && p.Bits() >= nat64.Bits():
		name = "NAT64"
		v4 = netip.PrefixFrom(netip.AddrFrom4([4]byte(b[12:16])), p.Bits()-96)
	case teredo.Overlaps(p) && p.Bits() >= teredo.Bits():
		return "Teredo", netip.Prefix{}, true
	default:
		return "", netip.Prefix{}, false
	}
	// Clients whose embedded address is private stay IPv6 (embeddedGlobal),
	// and a ban on their range holds for them.
	if v4.Bits() >= 8 && !embeddedGlobal(v4.Addr()) {
		return "", netip.Prefix{}, false
	}
	return name, v4, true
}

var (
	sixToFour = netip.MustParsePrefix("2002::/16")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	teredo    = netip.MustParsePrefix("2001::/32")
)
