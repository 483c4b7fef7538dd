package redisstore

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/store"
)

// An address allowed through one of three instances on one Redis is
// Safe on all three (the others after their refresh) at no round trip,
// never banned there while allowed; the ban it had is lifted; once the
// entry is over it is counted again everywhere.
func TestRedisAllowsReachEveryInstance(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			ns := testNamespace(t, addr)
			cfg := protect.Config{MaxRequests: 3, BanLimit: 4}
			ins := []*instance{
				newInstance(t, addr, ns, cfg, Options{RangeRefresh: -1}),
				newInstance(t, addr, ns, cfg, Options{RangeRefresh: -1}),
				newInstance(t, addr, ns, cfg, Options{RangeRefresh: -1}),
			}
			ctx := t.Context()
			client := netip.MustParseAddr("192.0.2.80")
			for range 5 {
				ins[1].p.VerifyAddr(ctx, client)
			}
			if d, _ := ins[1].p.VerifyAddr(ctx, client); d.Status != protect.Banned {
				t.Fatalf("instance 1 past BanLimit: %v, want Banned", d.Status)
			}
			allowed, lifted, err := admin.New(ins[0].p).Allow(ctx, []string{"192.0.2.80"}, admin.AllowOptions{For: time.Minute, Reason: "monitor", By: "ops"})
			if err != nil || len(allowed) != 1 || allowed[0].Reason != "monitor" || allowed[0].Source != "" || len(lifted) != 1 {
				t.Fatalf("Allow(192.0.2.80) = %+v, lifted %+v, %v; want the entry and its lifted ban", allowed, lifted, err)
			}
			for i, in := range ins {
				if err := in.store.Refresh(ctx); err != nil {
					t.Fatal(err)
				}
				in.clock.Advance(time.Second) // a cached ban ages out
				in.p.VerifyAddr(ctx, client)  // and the limits are published again, on their own time
				in.hook.Take()
				for j := range 5 {
					if d, _ := in.p.VerifyAddr(ctx, client); d.Status != protect.Safe {
						t.Fatalf("instance %d, request %d of the allowed client = %v, want Safe", i, j+1, d.Status)
					}
				}
				if n, names := in.hook.Take(); n != 0 {
					t.Fatalf("instance %d: 5 allowed requests took %d round trips %v, want 0", i, n, names)
				}
				if _, err := in.p.Ban(ctx, "192.0.2.80", protect.BanOptions{}); !errors.Is(err, store.ErrAllowed) {
					t.Fatalf("instance %d: Ban of the allowed client = %v, want ErrAllowed", i, err)
				}
			}
			for i, in := range ins {
				in.clock.Advance(time.Minute)
				if d, _ := in.p.VerifyAddr(ctx, client); d.Status != protect.Allowed || d.Count != int64(i+1) {
					t.Fatalf("instance %d after the entry's end = %v count %d, want Allowed, count %d", i, d.Status, d.Count, i+1)
				}
			}
		})
	}
}
