// Package blocktest makes the block lists that tests and benchmarks of
// several packages share.
package blocktest

import (
	"math/rand/v2"
	"net/netip"
)

// Entries makes n random IPv4 addresses and m random ranges (/16 to /28,
// a tenth of them IPv6), the same on every call, and returns them with
// the addresses it listed.
func Entries(n, m int) ([]netip.Prefix, []netip.Addr) {
	r := rand.New(rand.NewPCG(1, 2))
	entries := make([]netip.Prefix, 0, n+m)
	listed := make([]netip.Addr, 0, n)
	for range n {
		a := netip.AddrFrom4([4]byte{byte(1 + r.UintN(222)), byte(r.UintN(256)), byte(r.UintN(256)), byte(r.UintN(256))})
		entries = append(entries, netip.PrefixFrom(a, 32))
		listed = append(listed, a)
	}
	for i := range m {
		if i%10 == 0 {
			var b [16]byte
			b[0], b[1] = 0x20, 0x01
			for j := 2; j < 8; j++ {
				b[j] = byte(r.UintN(256))
			}
			entries = append(entries, netip.PrefixFrom(netip.AddrFrom16(b), 32+int(r.UintN(33))).Masked())
			continue
		}
		a := netip.AddrFrom4([4]byte{byte(1 + r.UintN(222)), byte(r.UintN(256)), byte(r.UintN(256)), byte(r.UintN(256))})
		entries = append(entries, netip.PrefixFrom(a, 16+int(r.UintN(13))).Masked())
	}
	return entries, listed
}
