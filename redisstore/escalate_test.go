package redisstore

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// Prefix escalation runs through the store seam alone (the whole scenario
// runs on the memory store, in package protect): on Redis, three /64
// bans ban their /56, and every instance refuses inside it.
func TestEscalationRedis(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			ns := testNamespace(t, addr)
			a := newInstance(t, addr, ns, protect.Config{MaxRequests: 1, BanLimit: 1, StoreTimeout: 10 * time.Second}, Options{RangeRefresh: -1})
			for _, k := range []string{"2001:db8:1:1::1", "2001:db8:1:2::1", "2001:db8:1:3::1"} {
				banKey(t, a.p, k)
			}
			r := rangeBansOf(t, a.p)
			if b, ok := r["2001:db8:1::/56"]; len(r) != 1 || !ok || b.Reason != "3 /64 bans inside 2001:db8:1::/56" {
				t.Fatalf("after 3 /64 bans: ranges %v; want 2001:db8:1::/56", r)
			}
			// Another instance sees the escalated range as any range ban.
			b := newInstance(t, addr, ns, protect.Config{MaxRequests: 1, BanLimit: 1}, Options{RangeRefresh: -1})
			if got := status(t, b.p, "2001:db8:1:ff::9"); got != protect.Banned {
				t.Fatalf("second instance inside the /56: %v; want Banned", got)
			}
		})
	}
}

// Escalation runs inside a client's request, so the range ban it writes
// must not scan the store for the counters inside the range (on a shared
// Redis of millions of keys the scan times out under StoreTimeout). An
// operator's range ban still does, which proves the hook sees the scan.
func TestEscalationNeverScans(t *testing.T) {
	for _, target := range redisTargets[:2] { // a cluster's scan runs on node clients the hook does not see
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			ns := testNamespace(t, addr)
			a := newInstance(t, addr, ns, protect.Config{MaxRequests: 1, BanLimit: 1, StoreTimeout: 10 * time.Second}, Options{RangeRefresh: -1})
			banKey(t, a.p, "2001:db8:1:1::1")
			banKey(t, a.p, "2001:db8:1:2::1")
			status(t, a.p, "2001:db8:1:4::1") // a counter inside the /56, not banned
			a.hook.Take()
			banKey(t, a.p, "2001:db8:1:3::1")
			_, names := a.hook.Take()
			if _, ok := rangeBansOf(t, a.p)["2001:db8:1::/56"]; !ok {
				t.Fatalf("3 /64 bans: no /56 (commands %v)", names)
			}
			if slices.Contains(names, "scan") {
				t.Fatalf("the request that escalated sent %v; want no scan", names)
			}
			if _, err := a.p.Lift(t.Context(), "2001:db8:1::/56", "test"); err != nil {
				t.Fatal(err)
			}
			// Not reset: the counter comes back at its count (1, so this
			// request passes BanLimit 1; a reset one would be Allowed) and
			// would expire within TTL, as the README says.
			if got := status(t, a.p, "2001:db8:1:4::1"); got != protect.Banned {
				t.Fatalf("inside the lifted escalated /56: %v; want protect.Banned (counter kept)", got)
			}

			a.hook.Take()
			if _, err := a.p.Ban(t.Context(), "198.51.100.0/24", protect.BanOptions{For: time.Minute}); err != nil {
				t.Fatal(err)
			}
			if _, names := a.hook.Take(); !slices.Contains(names, "scan") {
				t.Fatalf("an operator's range ban sent %v; want a scan that resets its counters", names)
			}
		})
	}
}

// banKey makes addr's key banned: with BanLimit 1, its second request is.
func banKey(t *testing.T, p *protect.Protector, addr string) {
	t.Helper()
	a := netip.MustParseAddr(addr)
	p.VerifyAddr(t.Context(), a)
	if d, _ := p.VerifyAddr(t.Context(), a); d.Status != protect.Banned {
		t.Fatalf("VerifyAddr(%s) = %v, want Banned", addr, d.Status)
	}
}

// rangeBansOf returns the range bans p lists, by key.
func rangeBansOf(t *testing.T, p *protect.Protector) map[string]protect.Ban {
	t.Helper()
	bans, err := admin.New(p).Bans(t.Context(), admin.Filter{RangesOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]protect.Ban{}
	for _, b := range bans {
		m[b.Key.String()] = b
	}
	return m
}

func status(t *testing.T, p *protect.Protector, addr string) protect.Status {
	t.Helper()
	d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr(addr))
	return d.Status
}
