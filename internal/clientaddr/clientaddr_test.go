package clientaddr

import (
	"net/netip"
	"testing"
)

// checkResolved asserts the invariants of any resolved address.
func checkResolved(t *testing.T, a netip.Addr) {
	t.Helper()
	if !a.IsValid() || a.Is4In6() || a.Zone() != "" || a.IsUnspecified() {
		t.Fatalf("resolve() = %v (%#v), want a valid, unmapped, zone-free and specified address", a, a)
	}
	if a.Is6() && embeddedIPv4(a) != a {
		t.Fatalf("resolve() = %v, want %v: the IPv4 host it embeds, which it must be counted as", a, embeddedIPv4(a))
	}
}

func FuzzParseNode(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "1.2.3.4:80", "[2001:db8::1]:443", "2001:db8::1", "::ffff:1.2.3.4", "fe80::1%eth0", "[", "[]:", "0.0.0.0", "[::ffff:0.0.0.0]:1",
		"2002:c000:204::1", "[64:ff9b::1.2.3.4]:80", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2002::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if a, ok := parseNode(s); ok {
			checkResolved(t, a)
		}
		if a, ok := parseForwardedNode(s); ok {
			checkResolved(t, a)
		}
	})
}

func FuzzForwarded(f *testing.F) {
	for _, s := range []string{`for=192.0.2.43, for=unknown`, `for="[2001:db8:cafe::17]:4711"`, `for=1.2.3.4;proto=http;by="a,b"`, `for="\`, `for="a\"b"`, `;`, `,`, `for=1;for=2`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		fors, ok := parseForwarded(line, nil)
		if !ok {
			return
		}
		for _, v := range fors {
			if a, ok := parseForwardedNode(v); ok {
				checkResolved(t, a)
			}
		}
	})
}
