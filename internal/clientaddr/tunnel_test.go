package clientaddr

import (
	"net/netip"
	"testing"
)

func TestEmbeddedIPv4(t *testing.T) {
	tests := []struct{ in, want string }{
		{"2002:c000:204::1", "192.0.2.4"},
		{"2002:c000:204:ffff:ffff:ffff:ffff:ffff", "192.0.2.4"},
		{"2002:cb00:7100::", "203.0.113.0"},
		{"2002:7f00:1::1", "2002:7f00:1::1"},       // loopback
		{"2002:a9fe:1::1", "2002:a9fe:1::1"},       // link-local
		{"2002:c0a8:101::1", "2002:c0a8:101::1"},   // private
		{"2002:e000:1::1", "2002:e000:1::1"},       // multicast
		{"2002:ffff:ffff::1", "2002:ffff:ffff::1"}, // broadcast
		{"2002:1:2::1", "2002:1:2::1"},             // 0.0.0.0/8
		{"64:ff9b::c633:6407", "198.51.100.7"},
		{"64:ff9b::1:c633:6407", "64:ff9b::1:c633:6407"}, // not the /96
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.45"},
		{"2001:1::3fff:fdd2", "2001:1::3fff:fdd2"}, // not 2001::/32
		{"2001:db8::1", "2001:db8::1"},
		{"2003::1", "2003::1"},
	}
	for _, tt := range tests {
		if got := embeddedIPv4(netip.MustParseAddr(tt.in)); got != netip.MustParseAddr(tt.want) {
			t.Errorf("embeddedIPv4(%s) = %v, want %s", tt.in, got, tt.want)
		}
	}
	a := netip.MustParseAddr("2002:c000:204::1")
	if n := testing.AllocsPerRun(100, func() { Normalize(a) }); n != 0 {
		t.Fatalf("Normalize(%s) allocates %v times, want 0", a, n)
	}
}
