package redisstore

import (
	"net/netip"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	protect "github.com/httpprotect/protect"
)

// A ban lifted by another instance, and seen lifted here once the cached
// answer aged (Redis answered "not banned"), must not come back when
// Redis then fails: the held bans answer while Redis cannot be asked, and
// this instance has asked since the lift.
func TestLiftSeenIsNotHeldWhileTheStoreIsDown(t *testing.T) {
	m := miniredis.RunT(t)
	ns := "protect:"
	a := newInstance(t, m.Addr(), ns, protect.Config{OnStoreError: protect.FailOpen}, Options{RangeRefresh: -1})
	b := newInstance(t, m.Addr(), ns, protect.Config{OnStoreError: protect.FailOpen}, Options{RangeRefresh: -1})
	ctx := t.Context()
	addr := netip.MustParseAddr("203.0.113.5")
	if _, err := a.p.Ban(ctx, addr.String(), protect.BanOptions{For: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if d, _ := a.p.VerifyAddr(ctx, addr); d.Status != protect.Banned {
		t.Fatalf("%v banned: %v", addr, d.Status)
	}
	if lifted, err := b.p.Lift(ctx, addr.String(), "ops"); err != nil || len(lifted) != 1 {
		t.Fatalf("Lift on the other instance = %v, %v", lifted, err)
	}
	a.clock.Advance(2 * time.Second) // past BanCacheTTL: a asks Redis again
	if d, _ := a.p.VerifyAddr(ctx, addr); d.Status != protect.Allowed {
		t.Fatalf("%v lifted, asked again: %v (%v); want allowed", addr, d.Status, d.Err)
	}
	m.Close()
	for i := range 2 * breakerThreshold {
		d, _ := a.p.VerifyAddr(ctx, addr)
		if d.Status != protect.Allowed {
			t.Fatalf("request %d of %v, lifted and seen lifted, Redis dead (FailOpen): %v; want allowed", i, addr, d.Status)
		}
	}
}
