package protect

import (
	"encoding/binary"
	"net/netip"
)

// aggregator maps a client address to the key it is counted under.
//
// One host with an IPv6 /64 can rotate through 2^64 addresses, so IPv6
// clients are counted per /64 by default; IPv4 clients per address.
type aggregator struct {
	v4Bits, v6Bits int
}

// key returns the counting key of a normalised address.
func (ag aggregator) key(a netip.Addr) Key {
	bits := ag.v6Bits
	if a.Is4() {
		bits = ag.v4Bits
	}
	if bits == a.BitLen() {
		return Key{Prefix: netip.PrefixFrom(a, bits)} // nothing to mask
	}
	p, _ := a.Prefix(bits) // bits was checked by New
	return Key{Prefix: p}
}

// keyHint is a cheap spread of k, for picking a stripe of counters
// (stats.go): its IPv4 address, the two halves of its IPv6 address XORed, or its
// name's length and first bytes.
func keyHint(k Key) uint64 {
	if k.Prefix.IsValid() {
		a := k.Prefix.Addr()
		if a.Is4() {
			b := a.As4()
			return uint64(binary.BigEndian.Uint32(b[:]))
		}
		b := a.As16()
		return binary.BigEndian.Uint64(b[:8]) ^ binary.BigEndian.Uint64(b[8:])
	}
	h := uint64(len(k.Name))
	for i := 0; i < len(k.Name) && i < 8; i++ {
		h = h<<8 | uint64(k.Name[i])
	}
	return h
}
