package protect

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// A host with one IPv4 address owns a 6to4 /48: rotating through its
// /64s is still one client, and the lists and ban targets that name one of
// its addresses name that client.
func TestSixToFourIsOneClient(t *testing.T) {
	ctx := t.Context()
	p, _ := newTestProtector(t, Config{MaxRequests: 3, SafeNetworks: []string{"2002:cb00:7109::1"}})
	var statuses []Status
	for i := range 5 {
		a := netip.AddrFrom16([16]byte{0x20, 0x02, 192, 0, 2, 4, 0, byte(i + 1), 15: 1})
		d, _ := p.VerifyAddr(ctx, a)
		if d.Key.String() != "192.0.2.4" || d.Addr != netip.MustParseAddr("192.0.2.4") {
			t.Fatalf("VerifyAddr(%v) = key %v addr %v, want 192.0.2.4", a, d.Key, d.Addr)
		}
		statuses = append(statuses, d.Status)
	}
	if statuses[2] != Allowed || statuses[3] != Limited || statuses[4] != Limited {
		t.Fatalf("VerifyAddr of five /64s of one 6to4 host = %v, want the 4th and 5th limited", statuses)
	}

	if d, _ := p.VerifyAddr(ctx, netip.MustParseAddr("203.0.113.9")); d.Status != Safe {
		t.Fatalf("VerifyAddr(203.0.113.9), the IPv4 host of a safe 6to4 address = %v, want Safe", d.Status)
	}

	k, isRange, err := p.target("2002:c633:6401:7::1")
	if err != nil || isRange || k.String() != "198.51.100.1" {
		t.Fatalf("Target(2002:c633:6401:7::1) = %v %v %v, want 198.51.100.1", k, isRange, err)
	}
	if _, err := p.Ban(ctx, "2002:c633:6401:7::1", BanOptions{}); err != nil {
		t.Fatal(err)
	}
	if d, _ := p.VerifyAddr(ctx, netip.MustParseAddr("198.51.100.1")); d.Status != Banned {
		t.Fatalf("VerifyAddr(198.51.100.1) after a ban on its 6to4 address = %v, want Banned", d.Status)
	}
}

// A CIDR inside 6to4, NAT64 or Teredo holds no client: each resolves to
// the IPv4 address it embeds. A ban on one would be listed and never
// hold, so it is refused with the IPv4 range meant, where there is one;
// one whose clients stay IPv6 (a private embedded address) is taken.
func TestTunnelRangeTargets(t *testing.T) {
	p, _ := newTestProtector(t, Config{})
	ctx := t.Context()
	for _, c := range []struct{ target, hint string }{
		{"2002:c000:204::/48", "192.0.2.4/32"}, // one 6to4 host's /48
		{"2002:c000:204:1::/64", "192.0.2.4/32"},
		{"2002:c000:200::/40", "192.0.2.0/24"},
		{"2002::/16", "0.0.0.0/0"},
		{"64:ff9b::c000:200/120", "192.0.2.0/24"},
		{"2001:0:4136:e378::/64", "IPv4 range"},
	} {
		_, err := p.Ban(ctx, c.target, BanOptions{Force: true})
		if !errors.Is(err, ErrBadTarget) || !strings.Contains(err.Error(), c.hint) || !strings.Contains(err.Error(), strconv.Quote(c.target)) {
			t.Errorf("Ban(%q) = %v; want ErrBadTarget quoting it and naming %s", c.target, err, c.hint)
		}
	}
	if got := bannedKeys(t, p); len(got) != 0 {
		t.Fatalf("bannedKeys() after refused bans = %v, want none", got)
	}
	if _, err := p.Ban(ctx, "2002:a00::/24", BanOptions{}); err != nil { // 10.0.0.0/8 inside: those clients stay IPv6
		t.Fatalf("Ban(2002:a00::/24) = %v, want nil", err)
	}
	if d, _ := p.VerifyAddr(ctx, netip.MustParseAddr("2002:a00:3::1")); d.Status != Banned {
		t.Fatalf("VerifyAddr(2002:a00:3::1) inside a banned 6to4 range of private addresses = %v, want Banned", d.Status)
	}
}
