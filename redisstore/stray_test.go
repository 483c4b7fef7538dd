package redisstore

import (
	"context"
	"log/slog"
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/logtest"
	"github.com/redis/go-redis/v9"
)

// A hash at a ban key is no ban: it is damage to that one key, as a
// string that is no ban record is. The request is decided as if it were
// absent and counted, under FailClosed too, with no error for the failure
// policy; the circuit stays closed; and lifting removes it.
func TestRedisUnknownHashAtBanKey(t *testing.T) {
	m := miniredis.RunT(t)
	in := newInstance(t, m.Addr(), "protect:", protect.Config{OnStoreError: protect.FailClosed}, Options{RangeRefresh: -1})
	in.store.client.HSet(t.Context(), "protect:{192.0.2.10}:b", "x", "y")
	for i := range 3 {
		d, err := in.p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.10"))
		if err != nil || d.Status != protect.Allowed || d.Count != int64(i+1) {
			t.Fatalf("VerifyAddr(192.0.2.10) #%d = %v, count %d, err %v, %v; want allowed, count %d", i+1, d.Status, d.Count, d.Err, err, i+1)
		}
	}
	if st := in.p.Stats(); st.Malformed == 0 || st.StoreErrors != 0 {
		t.Fatalf("Stats() = %d malformed, %d store errors; want the hash counted as malformed, no store error", st.Malformed, st.StoreErrors)
	}
	lifted, err := in.p.Lift(t.Context(), "192.0.2.10", "test")
	if err != nil || len(lifted) != 1 || lifted[0].Malformed == "" || !strings.Contains(lifted[0].Malformed, "a key of another type") {
		t.Fatalf("Lift(192.0.2.10) = %+v, %v; want the hash lifted as a malformed record", lifted, err)
	}
	if m.Exists("protect:{192.0.2.10}:b") {
		t.Fatal("the hash is still at the ban key after the lift")
	}
}

// Listing bans lists an index entry whose key holds a key of another
// type as a damaged record, for an operator to see and lift, beside the
// others.
func TestRedisListingShowsStrayKeys(t *testing.T) {
	m := miniredis.RunT(t)
	in := newInstance(t, m.Addr(), "protect:", protect.Config{}, Options{RangeRefresh: -1})
	in.store.client.HSet(t.Context(), "protect:{192.0.2.10}:b", "x", "y")
	// Indexed, so that the listing reads the stray key and must skip it.
	in.store.client.ZAdd(t.Context(), "protect:bans", redis.Z{Score: math.Inf(1), Member: "192.0.2.10"})
	if _, err := in.p.Ban(t.Context(), "192.0.2.11", protect.BanOptions{Reason: "real"}); err != nil {
		t.Fatal(err)
	}
	bans, err := admin.New(in.p).Bans(t.Context(), admin.Filter{})
	slices.SortFunc(bans, func(a, b protect.Ban) int { return strings.Compare(a.Key.String(), b.Key.String()) })
	if err != nil || len(bans) != 2 || bans[0].Key.String() != "192.0.2.10" || !strings.Contains(bans[0].Malformed, "a key of another type") ||
		bans[1].Key.String() != "192.0.2.11" || bans[1].Malformed != "" {
		t.Fatalf("Bans() = %+v, %v; want the hash at 192.0.2.10 as a malformed record and the ban on 192.0.2.11", bans, err)
	}
}

// A counter that holds no count (a hash, a list, text, a number past
// int64) is damage to that one client's key: the take deletes it and
// counts that client again from nothing, every other client is served
// as ever under FailClosed, the breaker stays closed, the damage is
// counted once in Stats.Malformed and logged once, and Inspect reads it
// as no count rather than failing.
func TestRedisDamagedCounter(t *testing.T) {
	damages := []struct {
		name  string
		write func(ctx context.Context, c redis.UniversalClient, key string)
		quote string // what the log line quotes
	}{
		{"hash", func(ctx context.Context, c redis.UniversalClient, k string) { c.HSet(ctx, k, "x", "y") }, `"a key of type hash"`},
		{"list", func(ctx context.Context, c redis.UniversalClient, k string) { c.LPush(ctx, k, "x") }, `"a key of type list"`},
		{"text", func(ctx context.Context, c redis.UniversalClient, k string) { c.Set(ctx, k, "12abc", 0) }, `"12abc"`},
		{"out of range", func(ctx context.Context, c redis.UniversalClient, k string) { c.Set(ctx, k, "99999999999999999999", 0) }, `"99999999999999999999"`},
	}
	for _, target := range redisTargets {
		for _, dm := range damages {
			t.Run(target.Name+"/"+dm.name, func(t *testing.T) {
				addr := target.Addr(t)
				ns := testNamespace(t, addr)
				logs := &logtest.Recorder{}
				in := newInstance(t, addr, ns, protect.Config{MaxRequests: 1000, OnStoreError: protect.FailClosed, StoreTimeout: 10 * time.Second, Logger: slog.New(logs)}, Options{RangeRefresh: -1})
				ctx := t.Context()
				c := in.store.Client()
				counter := ns + "{198.51.100.9}:c"
				dm.write(ctx, c, counter)
				if st, err := admin.New(in.p).InspectKey(ctx, protect.Key{Prefix: netip.MustParsePrefix("198.51.100.9/32")}); err != nil || st.Count != 0 {
					t.Fatalf("Inspect(198.51.100.9) = count %d, %v; want 0, no error", st.Count, err)
				}
				damaged := netip.MustParseAddr("198.51.100.9")
				for i := 1; i <= 50; i++ {
					if d, err := in.p.VerifyAddr(ctx, damaged); err != nil || d.Err != nil || d.Status != protect.Allowed || d.Count != int64(i) {
						t.Fatalf("VerifyAddr(%v) #%d = %v, count %d, %v, %v; want allowed, count %d", damaged, i, d.Status, d.Count, d.Err, err, i)
					}
					for j := range 2 {
						other := netip.AddrFrom4([4]byte{198, 51, 100, byte(100 + j)})
						if d, err := in.p.VerifyAddr(ctx, other); err != nil || d.Status != protect.Allowed || d.Count != int64(i) {
							t.Fatalf("VerifyAddr(%v) #%d = %v, count %d, %v; want allowed, count %d", other, i, d.Status, d.Count, err, i)
						}
					}
				}
				if st := in.p.Stats(); st.Malformed != 1 || st.StoreErrors != 0 || st.StoreFailures != 0 || st.CircuitOpens != 0 {
					t.Errorf("Stats() = %d malformed, %d store errors, %d failures, %d circuit opens; want 1, 0, 0, 0", st.Malformed, st.StoreErrors, st.StoreFailures, st.CircuitOpens)
				}
				if v, err := c.Get(ctx, counter).Result(); err != nil || v != "50" {
					t.Errorf("GET %s = %q, %v; want 50", counter, v, err)
				}
				lines := 0
				for _, r := range logs.Records() {
					if strings.HasPrefix(r["msg"], "protect: malformed record") {
						lines++
						if r["key"] != counter || !strings.Contains(r["error"], dm.quote) {
							t.Errorf("log line %v: want key %s and %s quoted", r, counter, dm.quote)
						}
					}
				}
				if lines != 1 {
					t.Errorf("malformed record lines logged = %d, want 1; log: %v", lines, logs.Records())
				}
			})
		}
	}
}

// An offense history that is no sorted set does not stop the ban it
// would count: it is forgotten, and the ban is the first offense.
func TestRedisDamagedOffenses(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			ns := testNamespace(t, addr)
			in := newInstance(t, addr, ns, protect.Config{MaxRequests: 1, BanLimit: 2, OnStoreError: protect.FailClosed, StoreTimeout: 10 * time.Second}, Options{RangeRefresh: -1})
			ctx := t.Context()
			in.store.Client().HSet(ctx, ns+"{198.51.100.9}:o", "x", "y")
			a := netip.MustParseAddr("198.51.100.9")
			var d protect.Decision
			for range 3 {
				d, _ = in.p.VerifyAddr(ctx, a)
			}
			if d.Status != protect.Banned || d.Err != nil || d.Ban == nil || d.Ban.Offense != 1 {
				t.Fatalf("VerifyAddr(%v) past the ban limit = %v, err %v, ban %+v; want banned, offense 1", a, d.Status, d.Err, d.Ban)
			}
			if st := in.p.Stats(); st.StoreErrors != 0 || st.CircuitOpens != 0 {
				t.Errorf("Stats() = %d store errors, %d circuit opens; want 0, 0", st.StoreErrors, st.CircuitOpens)
			}
		})
	}
}
