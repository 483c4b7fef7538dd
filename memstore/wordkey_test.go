package memstore

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// wordsOfAs16 is wordsOf as it reads every address: by its 16-byte
// form, an IPv4 address's mapped one. The journal and the durable state
// hold these words, so wordsOf must give exactly them.
func wordsOfAs16(p netip.Prefix) wordKey {
	b := p.Addr().As16()
	return wordKey{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:]), bits: uint64(p.Bits())}
}

func TestWordsOfIsAs16(t *testing.T) {
	prefixes := []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("0.0.0.0/32"),
		netip.MustParsePrefix("255.255.255.255/32"), netip.MustParsePrefix("10.1.2.0/24"),
		netip.MustParsePrefix("::/0"), netip.MustParsePrefix("::/128"),
		netip.MustParsePrefix("2001:db8:1:2::/64"), netip.MustParsePrefix("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"),
		netip.MustParsePrefix("::ffff:192.0.2.7/128"), netip.MustParsePrefix("::ffff:0.0.0.0/96"),
		netip.PrefixFrom(netip.MustParseAddr("fe80::1%eth0"), 64), // a zone, which As16 drops
		{}, // invalid: Bits is -1
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		var b4 [4]byte
		var b16 [16]byte
		binary.BigEndian.PutUint32(b4[:], r.Uint32())
		binary.BigEndian.PutUint64(b16[:8], r.Uint64())
		binary.BigEndian.PutUint64(b16[8:], r.Uint64())
		p4, _ := netip.AddrFrom4(b4).Prefix(r.IntN(33))
		p6, _ := netip.AddrFrom16(b16).Prefix(r.IntN(129))
		prefixes = append(prefixes, p4, p6)
	}
	for _, p := range prefixes {
		if got, want := wordsOf(p), wordsOfAs16(p); got != want {
			t.Errorf("wordsOf(%v) = %+v, want %+v", p, got, want)
		}
	}
}
