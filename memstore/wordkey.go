package memstore

import (
	"encoding/binary"
	"net/netip"
)

// A wordKey is a masked address prefix as two machine words and a length:
// cheap to hash and compare, and free of pointers. IPv4 is held in its
// IPv4-mapped form, which no normalised IPv6 address takes, so the two
// families never meet.
type wordKey struct {
	hi, lo, bits uint64
}

// wordsOf returns the wordKey of a masked prefix. memSpace.addrKey
// computes the same on the hot path (TestAddrKeyHash).
func wordsOf(p netip.Prefix) wordKey {
	a := p.Addr()
	if a.Is4() {
		b := a.As4()
		return wordKey{lo: 0xffff<<32 | uint64(binary.BigEndian.Uint32(b[:])), bits: uint64(p.Bits())}
	}
	b := a.As16()
	return wordKey{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:]), bits: uint64(p.Bits())}
}

// prefix returns k as a netip.Prefix.
func (k wordKey) prefix() netip.Prefix {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], k.hi)
	binary.BigEndian.PutUint64(b[8:], k.lo)
	return netip.PrefixFrom(netip.AddrFrom16(b).Unmap(), int(k.bits))
}
