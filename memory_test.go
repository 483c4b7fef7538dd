package protect

import (
	"context"
	"net/netip"
	"testing"
)

// The hot path allocates nothing: every address, hot or new, through a
// Protector on the memory store.
func TestVerifyAddrDoesNotAllocate(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.7")
	p, _ := newTestProtector(t, Config{MaxRequests: 1 << 40, BanLimit: -1})
	bg := context.Background()
	if n := testing.AllocsPerRun(1000, func() { p.VerifyAddr(bg, a) }); n != 0 {
		t.Fatalf("VerifyAddr on a hot address allocates %v times, want 0", n)
	}
	i := 0
	fresh4 := func() {
		i++
		p.VerifyAddr(bg, netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}))
	}
	if n := testing.AllocsPerRun(1000, fresh4); n != 0 {
		t.Fatalf("VerifyAddr on a new IPv4 address each time allocates %v times, want 0", n)
	}
	j := 0
	fresh6 := func() { // a new /64 each time
		j++
		p.VerifyAddr(bg, netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, byte(j >> 8), byte(j), 15: 1}))
	}
	if n := testing.AllocsPerRun(1000, fresh6); n != 0 {
		t.Fatalf("VerifyAddr on a new IPv6 /64 each time allocates %v times, want 0", n)
	}
	// AllocsPerRun calls once more than it measures.
	if got, want := p.store.(*MemoryStore).Len(), 1+1001+1001; got != want {
		t.Fatalf("protector's store Len() = %d, want %d: every new address counted", got, want)
	}
}
