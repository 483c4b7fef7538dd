package redisstore

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"

	"github.com/alicebob/miniredis/v2"
)

// Listing reads the index of key bans, a page at a time: more bans than
// one page holds are all listed, a CIDR lift lifts every one of them in
// pages, and no listing scans the keyspace.
func TestRedisListsManyBans(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			ns := testNamespace(t, addr)
			// StoreTimeout bounds each page (and each Ban); a second keeps
			// a loaded machine from failing the test.
			cfg := protect.Config{MaxRequests: 1, BanLimit: 1, StoreTimeout: time.Second}
			if target.Name == "miniredis" {
				// It runs Lua in Go, parsing each script anew: a page of
				// lifts, each journaled, takes seconds, more under -race.
				cfg.StoreTimeout = 20 * time.Second
			}
			in := newInstance(t, addr, ns, cfg, Options{RangeRefresh: -1, BanCacheTTL: -1})
			ctx := t.Context()
			const n = 2*banPage + 7
			for i := range n {
				target := fmt.Sprintf("100.64.%d.%d", i/250, i%250+1)
				if i%3 == 0 { // an automatic ban, written by take.lua
					a := netip.MustParseAddr(target)
					in.p.VerifyAddr(ctx, a)
					if d, _ := in.p.VerifyAddr(ctx, a); d.Status != protect.Banned {
						t.Fatalf("%s: %v, want banned", target, d.Status)
					}
					continue
				}
				if _, err := in.p.Ban(ctx, target, protect.BanOptions{For: time.Hour, Permanent: i%3 == 1}); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range []string{"198.51.100.0/24", "100.64.0.0/24"} {
				if _, err := in.p.Ban(ctx, r, protect.BanOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for round := range 2 {
				in.hook.Take()
				bans, err := admin.New(in.p).Bans(ctx, admin.Filter{})
				if err != nil || len(bans) != n+2 {
					t.Fatalf("round %d: Bans = %d bans, %v; want %d", round, len(bans), err, n+2)
				}
				if _, names := in.hook.Take(); round == 1 && slices.Contains(names, "scan") {
					t.Fatalf("round %d: listing scanned the keyspace: %v", round, names)
				}
			}
			lifted, err := in.p.Lift(ctx, "100.64.0.0/16", "test")
			if err != nil || len(lifted) != n+1 {
				t.Fatalf("Lift(100.64.0.0/16) = %d bans, %v; want %d", len(lifted), err, n+1)
			}
			bans, err := admin.New(in.p).Bans(ctx, admin.Filter{})
			if err != nil || len(bans) != 1 || bans[0].Key.String() != "198.51.100.0/24" {
				t.Fatalf("after the lift: %v, %v", bans, err)
			}
			if d, _ := in.p.VerifyAddr(ctx, netip.MustParseAddr("100.64.0.1")); d.Status != protect.Allowed {
				t.Fatalf("a lifted client: %v", d.Status)
			}
		})
	}
}

// The slot tags name an index in each slot of Redis Cluster.
func TestSlotTags(t *testing.T) {
	tags := slotTags()
	for slot, tag := range tags {
		if tag == "" || keySlot([]byte(tag)) != slot {
			t.Fatalf("slot %d: tag %q", slot, tag)
		}
	}
	// Redis' own examples (CLUSTER KEYSLOT).
	for key, slot := range map[string]int{"somekey": 11058, "foo": 12182, "user1000": 3443} {
		if got := keySlot([]byte(key)); got != slot {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, slot)
		}
	}
}

// A ban the plan script writes (Config.Plan, crossing BanLimit) is in
// the index like one the take script writes.
func TestRedisPlanBansListed(t *testing.T) {
	plan, err := protect.NewPlan("login", protect.Rate{Limit: 100, Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			// A listing on a cluster reads every slot's index: a loaded
			// machine needs more than the default StoreTimeout per page.
			in := newInstance(t, addr, testNamespace(t, addr), protect.Config{Plan: plan, BanLimit: 2, StoreTimeout: 10 * time.Second}, Options{RangeRefresh: -1})
			a := netip.MustParseAddr("192.0.2.77")
			for range 3 {
				in.p.VerifyAddr(t.Context(), a)
			}
			bans, err := admin.New(in.p).Bans(t.Context(), admin.Filter{})
			if err != nil || len(bans) != 1 || bans[0].Key.String() != "192.0.2.77" || bans[0].Source != protect.SourceAuto {
				t.Fatalf("Bans = %+v, %v; want the plan's stream ban", bans, err)
			}
		})
	}
}

// The index of key bans stays the size of the bans in force even when
// nobody lists bans: writing a ban, by an operator (ban.lua) or by the
// threshold (take.lua), sweeps the entries of bans that ended, by the
// script's own clock, and journals each as over.
func TestRedisIndexPrunedOnWrite(t *testing.T) {
	m := miniredis.RunT(t)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	m.SetTime(start)
	in := newInstance(t, m.Addr(), "prune:", protect.Config{MaxRequests: 1, BanLimit: 1, BanDuration: time.Second},
		Options{RangeRefresh: -1, BanCacheTTL: -1})
	ctx := t.Context()
	advance := func(d time.Duration) {
		t.Helper()
		start = start.Add(d)
		m.SetTime(start)
		m.FastForward(d)
	}
	members := func() []string {
		t.Helper()
		got, err := m.ZMembers("prune:bans")
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		return got
	}
	for _, a := range []string{"192.0.2.1", "192.0.2.2"} {
		if _, err := in.p.Ban(ctx, a, protect.BanOptions{For: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	if got := members(); len(got) != 2 {
		t.Fatalf("index after two bans: %v", got)
	}
	advance(time.Second) // at their end: kept, as Redis keeps a key through its last millisecond
	if _, err := in.p.Ban(ctx, "192.0.2.3", protect.BanOptions{For: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if got := members(); len(got) != 3 {
		t.Fatalf("index at the end of two bans: %v, want all three", got)
	}
	advance(time.Millisecond)
	if _, err := in.p.Ban(ctx, "192.0.2.4", protect.BanOptions{For: time.Second}); err != nil {
		t.Fatal(err)
	}
	if got := members(); !slices.Equal(got, []string{"192.0.2.3", "192.0.2.4"}) {
		t.Fatalf("ban.lua left %v, want [192.0.2.3 192.0.2.4]", got)
	}
	advance(2 * time.Minute)
	a := netip.MustParseAddr("192.0.2.5")
	for range 2 {
		in.p.VerifyAddr(ctx, a)
	}
	if d, _ := in.p.VerifyAddr(ctx, a); d.Status != protect.Banned {
		t.Fatalf("192.0.2.5: %v, want banned", d.Status)
	}
	if got := members(); !slices.Equal(got, []string{"192.0.2.3", "192.0.2.5"}) {
		t.Fatalf("take.lua left %v, want [192.0.2.3 192.0.2.5]", got)
	}
}
