package redisstore

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/logtest"
	"github.com/httpprotect/protect/internal/redistest"

	"github.com/alicebob/miniredis/v2"
)

// Three instances, each with its own client, share one Redis: 300
// requests round robin give exactly 100 served, 150 limited, 50 banned,
// and exactly one ban record.
func TestRedisThreeInstancesExact(t *testing.T) {
	for _, target := range redisTargets {
		for _, concurrent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/concurrent=%v", target.Name, concurrent), func(t *testing.T) {
				addr := target.Addr(t)
				ns := testNamespace(t, addr)
				var inst [3]*instance
				for i := range inst {
					// Exactness is the subject here, not deadlines: miniredis under -race
					// is slow enough to miss the default 100ms.
					inst[i] = newInstance(t, addr, ns, protect.Config{MaxRequests: 100, BanLimit: 250, StoreTimeout: 10 * time.Second}, Options{RangeRefresh: -1})
				}
				client := netip.MustParseAddr("203.0.113.7")
				got := sendAll(t, 300, concurrent, func(i int) (protect.Decision, error) { return inst[i%3].p.VerifyAddr(t.Context(), client) })
				if got[protect.Allowed] != 100 || got[protect.Limited] != 150 || got[protect.Banned] != 50 || len(got) != 3 {
					t.Fatalf("got %v; want allowed 100, limited 150, banned 50", got)
				}
				bans, err := admin.New(inst[0].p).Bans(t.Context(), admin.Filter{})
				if err != nil || len(bans) != 1 || bans[0].Key.String() != "203.0.113.7" || bans[0].Offense != 1 {
					t.Fatalf("bans: %+v %v", bans, err)
				}
			})
		}
	}
}

// One round trip per counted request, the script alone; none for safe
// networks and none for a ban this instance has already seen.
func TestRedisRoundTrips(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			in := newInstance(t, addr, testNamespace(t, addr), protect.Config{MaxRequests: 1000, BanLimit: 60, SafeNetworks: []string{"10.0.0.0/8"}}, Options{RangeRefresh: -1})
			ctx := t.Context()
			a := netip.MustParseAddr("198.51.100.1")
			in.p.VerifyAddr(ctx, a) // loads the script and the range bans once
			in.hook.Take()
			for i := 1; i <= 50; i++ {
				in.p.VerifyAddr(ctx, a)
				if n, names := in.hook.Take(); n != 1 || names[0] != "evalsha" {
					t.Fatalf("request %d: %d round trips %v", i, n, names)
				}
			}
			// A Check decides through the same script: one round trip, nothing counted.
			r := request(netip.AddrPortFrom(a, 5555).String())
			for i := 1; i <= 3; i++ {
				d, err := in.p.Check(ctx, r)
				if n, names := in.hook.Take(); n != 1 || len(names) != 1 || names[0] != "evalsha" {
					t.Fatalf("Check %d: %d round trips %v, want 1 evalsha", i, n, names)
				}
				if err != nil || d.Err != nil || d.Status != protect.Allowed || d.Count != 51 {
					t.Fatalf("Check %d = %v count %d, %v %v; want allowed with count 51", i, d.Status, d.Count, err, d.Err)
				}
			}
			for range 50 {
				if d, _ := in.p.VerifyAddr(ctx, netip.MustParseAddr("10.1.2.3")); d.Status != protect.Safe {
					t.Fatalf("safe: %v", d.Status)
				}
			}
			if n, names := in.hook.Take(); n != 0 {
				t.Fatalf("safe networks: %d round trips %v", n, names)
			}
			for { // cross BanLimit: the banning request is one round trip
				d, _ := in.p.VerifyAddr(ctx, a)
				if n, _ := in.hook.Take(); n != 1 {
					t.Fatalf("%d round trips", n)
				}
				if d.Status == protect.Banned {
					break
				}
			}
			for range 100 {
				if d, _ := in.p.VerifyAddr(ctx, a); d.Status != protect.Banned || d.RetryAfter != time.Hour {
					t.Fatalf("cached ban: %v %v", d.Status, d.RetryAfter)
				}
			}
			if n, names := in.hook.Take(); n != 0 {
				t.Fatalf("a cached ban cost %d round trips %v", n, names)
			}
			if d, _ := in.p.Check(ctx, r); d.Status != protect.Banned {
				t.Fatalf("Check of a cached ban = %v, want banned", d.Status)
			}
			if n, names := in.hook.Take(); n != 0 {
				t.Fatalf("Check of a cached ban: %d round trips %v, want 0", n, names)
			}
			// The cache is bounded in age: after BanCacheTTL the store is asked again.
			in.clock.Advance(600 * time.Millisecond)
			if d, _ := in.p.VerifyAddr(ctx, a); d.Status != protect.Banned {
				t.Fatal("ban forgotten")
			}
			if n, _ := in.hook.Take(); n != 1 {
				t.Fatalf("after the cache age: %d round trips", n)
			}
		})
	}
}

// A request that counts a consumer (KeyFunc) checks its address's ban
// first: two round trips, and none once this instance has seen that ban.
func TestRedisConsumerRoundTrips(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			in := newInstance(t, addr, testNamespace(t, addr), protect.Config{
				KeyFunc: func(r *http.Request) (string, bool) { return "acme", true },
			}, Options{RangeRefresh: -1})
			ctx := t.Context()
			r := request("198.51.100.1:5555")
			in.p.Verify(ctx, r) // loads the script and the range bans once
			in.hook.Take()
			for i := 1; i <= 3; i++ {
				d, _ := in.p.Verify(ctx, r)
				if n, names := in.hook.Take(); n != 2 || names[0] != "evalsha" || names[1] != "evalsha" || d.Key.String() != "acme" {
					t.Fatalf("request %d: %d round trips %v, counted as %s; want 2 evalsha, counted as acme", i, n, names, d.Key)
				}
			}
			if _, err := in.p.Ban(ctx, "198.51.100.1", protect.BanOptions{}); err != nil {
				t.Fatal(err)
			}
			in.p.Verify(ctx, r) // sees the ban
			in.hook.Take()
			for range 10 {
				if d, _ := in.p.Verify(ctx, r); d.Status != protect.Banned || d.Key.String() != "198.51.100.1" {
					t.Fatalf("a banned address with a consumer = %v on %s, want banned on the address", d.Status, d.Key)
				}
			}
			if n, names := in.hook.Take(); n != 0 {
				t.Fatalf("a cached address ban cost %d round trips %v", n, names)
			}
		})
	}
}

// A lift or a new range ban reaches every instance: a lifted key within
// BanCacheTTL, a range within one refresh.
func TestRedisBansReachEveryInstance(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			ns := testNamespace(t, addr)
			a := newInstance(t, addr, ns, protect.Config{MaxRequests: 2, BanLimit: 3}, Options{RangeRefresh: -1})
			b := newInstance(t, addr, ns, protect.Config{MaxRequests: 2, BanLimit: 3}, Options{RangeRefresh: -1})
			ctx := t.Context()
			client := netip.MustParseAddr("192.0.2.50")
			for range 4 {
				b.p.VerifyAddr(ctx, client)
			}
			if d, _ := b.p.VerifyAddr(ctx, client); d.Status != protect.Banned {
				t.Fatalf("b: %v", d.Status)
			}
			if d, _ := a.p.VerifyAddr(ctx, client); d.Status != protect.Banned {
				t.Fatalf("a sees the ban b wrote: %v", d.Status)
			}
			if lifted, err := a.p.Lift(ctx, "192.0.2.50", "test"); err != nil || len(lifted) != 1 {
				t.Fatalf("lift: %v %v", lifted, err)
			}
			if d, _ := a.p.VerifyAddr(ctx, client); d.Status != protect.Allowed || d.Count != 1 {
				t.Fatalf("a after its own lift: %v %d", d.Status, d.Count)
			}
			b.clock.Advance(500 * time.Millisecond) // b's cached answer ages out
			if d, _ := b.p.VerifyAddr(ctx, client); d.Status != protect.Allowed {
				t.Fatalf("b after the cache age: %v", d.Status)
			}
			// A range ban from a, seen by b after one refresh.
			if _, err := a.p.Ban(ctx, "198.51.100.0/24", protect.BanOptions{For: time.Hour, Reason: "scan"}); err != nil {
				t.Fatal(err)
			}
			inside := netip.MustParseAddr("198.51.100.9")
			if d, _ := a.p.VerifyAddr(ctx, inside); d.Status != protect.Banned {
				t.Fatalf("a, inside its range ban: %v", d.Status)
			}
			if err := b.store.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if d, _ := b.p.VerifyAddr(ctx, inside); d.Status != protect.Banned || d.RetryAfter <= 59*time.Minute {
				t.Fatalf("b after refresh: %v %v", d.Status, d.RetryAfter)
			}
			if lifted, err := a.p.Lift(ctx, "198.51.100.0/24", "test"); err != nil || len(lifted) != 1 {
				t.Fatalf("Lift(198.51.100.0/24) = %v, %v; want the range ban", lifted, err)
			}
			if err := b.store.Refresh(ctx); err != nil {
				t.Fatalf("Refresh() = %v", err)
			}
			if d, _ := b.p.VerifyAddr(ctx, inside); d.Status != protect.Allowed {
				t.Fatalf("b after the range lift: %v", d.Status)
			}
		})
	}
}

// The background refresher really runs: a range ban from one instance
// reaches another with no call from the test.
func TestRedisRangeRefresher(t *testing.T) {
	addr := miniredis.RunT(t).Addr()
	a := newInstance(t, addr, "protect:", protect.Config{}, Options{RangeRefresh: -1})
	b := newInstance(t, addr, "protect:", protect.Config{}, Options{RangeRefresh: 20 * time.Millisecond, Clock: time.Now})
	inside := netip.MustParseAddr("198.51.100.9")
	b.p.VerifyAddr(t.Context(), inside) // b starts using the namespace
	a.p.Ban(t.Context(), "198.51.100.0/24", protect.BanOptions{For: time.Hour})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if d, _ := b.p.VerifyAddr(t.Context(), inside); d.Status == protect.Banned {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the range ban never reached the other instance")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A consumer key that looks like a secret never reaches a key name.
func TestRedisSecretNeverInKeyNames(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			ns := testNamespace(t, addr)
			in := newInstance(t, addr, ns, protect.Config{MaxRequests: 1, BanLimit: 2}, Options{RangeRefresh: -1})
			const secret = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
			for range 4 { // counter, then ban and offense keys
				in.p.VerifyKey(t.Context(), secret)
			}
			keys, err := allKeys(t.Context(), in.store.client, globEscape(ns)+"*")
			keys = withoutPublished(keys, ns)
			if err != nil || len(keys) != 5 {
				t.Fatalf("keys %v %v; want a ban, an offense history, the ban index, its records and the journal", keys, err)
			}
			for _, k := range keys {
				if strings.HasSuffix(k, "bans") || strings.HasSuffix(k, "banrecs") || strings.HasSuffix(k, "events") {
					continue // the ban index, its records and the journal, whose values are checked below
				}
				if strings.Contains(k, secret) || strings.Contains(k, "4eC39") || !strings.Contains(k, "{~") {
					t.Fatalf("key name %q carries the secret", k)
				}
			}
			// The values too: the ban record (a string) and the offense
			// history (a sorted set).
			c := in.store.client
			for _, k := range keys {
				var v any
				typ, err := c.Type(t.Context(), k).Result()
				switch {
				case err != nil:
					t.Fatalf("TYPE %q: %v", k, err)
				case typ == "string" && strings.HasSuffix(k, "}:b"):
					v, err = c.Get(t.Context(), k).Result()
				case typ == "zset" && (strings.HasSuffix(k, "}:o") || strings.HasSuffix(k, "bans")):
					v, err = c.ZRange(t.Context(), k, 0, -1).Result()
				case typ == "hash" && strings.HasSuffix(k, "banrecs"):
					v, err = c.HGetAll(t.Context(), k).Result()
				case typ == "stream" && strings.HasSuffix(k, "events"):
					v, err = c.XRange(t.Context(), k, "-", "+").Result()
				default:
					t.Fatalf("key %q is a %s; want the ban string ...:b, the offense set ...:o, the ban index, its records or the journal", k, typ)
				}
				if err != nil || fmt.Sprint(v) == "" || fmt.Sprint(v) == "[]" {
					t.Fatalf("record %q = %v, %v; want one", k, v, err)
				}
				if strings.Contains(fmt.Sprint(v), secret) || strings.Contains(fmt.Sprint(v), "4eC39") {
					t.Fatalf("record %q carries the secret: %v", k, v)
				}
			}
		})
	}
}

func TestRedisBadInput(t *testing.T) {
	for _, raw := range []string{"http://example", "redis://:hunter2@127.0.0.1:notaport", "redis://127.0.0.1:6379/notadb", "::"} {
		_, err := Dial(raw, Options{})
		if err == nil {
			t.Fatalf("Dial(%q) accepted", raw)
		}
		if !strings.Contains(err.Error(), "redis URL") || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("Dial(%q): %v", raw, err)
		}
	}
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			ns := testNamespace(t, addr)
			for i, policy := range []protect.FailurePolicy{protect.FailOpen, protect.FailLocal, protect.FailClosed} {
				in := newInstance(t, addr, ns, protect.Config{OnStoreError: policy}, Options{RangeRefresh: -1})
				c := in.store.client
				// Foreign values where protect keeps its counter and ban
				// (a ban is a string record: a hash there is foreign), and
				// a string at a ban's key that is no ban record.
				c.HSet(t.Context(), ns+"{192.0.2.1}:c", "x", "y")
				c.HSet(t.Context(), ns+"{192.0.2.2}:b", "x", "y")
				c.Set(t.Context(), ns+"{192.0.2.3}:b", "not a ban record", 0)
				// The record that is no ban record, and the hash where a
				// ban record belongs, are damage to one client's record,
				// decided as if it were absent, under every policy
				// (TestRedisDamagedBanRecord); the hash where the counter
				// belongs is deleted and counted again from nothing by the
				// first instance (TestRedisDamagedCounter).
				for _, a := range []string{"192.0.2.3", "192.0.2.2", "192.0.2.1"} {
					if d, err := in.p.VerifyAddr(t.Context(), netip.MustParseAddr(a)); err != nil || d.Status != protect.Allowed || d.Count != int64(i+1) || d.Err != nil {
						t.Fatalf("%v: VerifyAddr(%s) = %v (count %d, Err %v), %v; want Allowed, count %d (one per instance), no error", policy, a, d.Status, d.Count, d.Err, err, i+1)
					}
				}
			}
		})
	}
}

// startRedisServer runs a redis-server of the test's own, which the test
// may stop and resume. It is skipped where the binary is missing, except
// under CI.
func startRedisServer(t *testing.T) (addr string, pause, resume func()) {
	t.Helper()
	srv := redistest.Start(t)
	return srv.Addr, srv.Pause, srv.Resume
}

// Redis stopped mid-run: no request waits much past StoreTimeout, the
// circuit breaker then stops calling Redis at all, every policy does what
// it says, and all recover by themselves when Redis is back.
func TestRedisOutage(t *testing.T) {
	const timeout = 100 * time.Millisecond
	for _, policy := range []protect.FailurePolicy{protect.FailOpen, protect.FailClosed, protect.FailLocal} {
		t.Run(policy.String(), func(t *testing.T) {
			addr, pause, resume := startRedisServer(t)
			logs := &logtest.Recorder{}
			in := newInstance(t, addr, "protect:", protect.Config{MaxRequests: 5, StoreTimeout: timeout, OnStoreError: policy, Logger: slog.New(logs)}, Options{RangeRefresh: -1})
			ctx := t.Context()
			client := netip.MustParseAddr("192.0.2.77")
			if d, _ := in.p.VerifyAddr(ctx, client); d.Status != protect.Allowed || d.Err != nil {
				t.Fatalf("before the outage: %v %v", d.Status, d.Err)
			}
			pause()
			in.hook.Take()
			var ds []protect.Decision
			for i := range 10 {
				start := time.Now()
				d, err := in.p.VerifyAddr(ctx, client)
				// A bound, not a benchmark: a stalled store must cost one
				// StoreTimeout, never go-redis' 3s read timeout.
				if took := time.Since(start); took > timeout+400*time.Millisecond {
					t.Fatalf("request %d waited %v with StoreTimeout %v", i, took, timeout)
				}
				if err != nil || d.Err == nil {
					t.Fatalf("request %d: %v %v", i, err, d.Err)
				}
				ds = append(ds, d)
			}
			// Three failures open the circuit; the next seven never reach
			// Redis. (HELLO is go-redis setting up a replacement connection.)
			_, names := in.hook.Take()
			if n := strings.Count(strings.Join(names, " "), "evalsha"); n != breakerThreshold {
				t.Fatalf("%d calls reached the stalled Redis %v; want %d", n, names, breakerThreshold)
			}
			if !errors.Is(ds[9].Err, protect.ErrStoreUnavailable) {
				t.Fatalf("with the circuit open: %v", ds[9].Err)
			}
			switch policy {
			case protect.FailOpen:
				for i, d := range ds {
					if d.Refused() {
						t.Fatalf("fail open, request %d: %v", i, d.Status)
					}
				}
			case protect.FailClosed:
				w := httptest.NewRecorder()
				ds[9].WriteResponse(w)
				if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || strings.Contains(w.Body.String(), "timeout") {
					t.Fatalf("fail closed: %d %v %s", w.Code, w.Header(), w.Body)
				}
			case protect.FailLocal:
				var got []protect.Status
				for _, d := range ds {
					got = append(got, d.Status)
				}
				// The local store starts from zero: 5 allowed, then limited.
				if fmt.Sprint(got) != "[allowed allowed allowed allowed allowed limited limited limited limited limited]" {
					t.Fatalf("fail local: %v", got)
				}
			}
			resume()
			in.clock.Advance(breakerCooldown) // the breaker lets one probe through
			var d protect.Decision
			for range 50 { // Redis may still be catching up on the stalled connections
				d, _ = in.p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.78"))
				if d.Err == nil {
					break
				}
				in.clock.Advance(breakerCooldown)
				time.Sleep(20 * time.Millisecond)
			}
			if d.Err != nil || d.Status != protect.Allowed || d.Count != 1 {
				t.Fatalf("after Redis came back: %v %v", d.Status, d.Err)
			}
			in.hook.Take()
			in.p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.78"))
			if n, _ := in.hook.Take(); n != 1 {
				t.Fatalf("after recovery %d round trips", n)
			}

			if logs.Count("protect: store failing; circuit open") != 1 || logs.Count("protect: store recovered") != 1 {
				t.Fatalf("state changes logged: %v", logs.Records())
			}
		})
	}
}

// Range bans are listed from their one hash, never by scanning keys, and
// a store that does not serve a namespace (protectctl) writes a range ban
// in one script without loading a local copy it would never use (then
// scans for the counters inside it, to reset them).
func TestRedisRangeBansCost(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			in := newInstance(t, addr, testNamespace(t, addr), protect.Config{}, Options{RangeRefresh: -1})
			ctx := t.Context()
			// The first call also opens a connection and loads the script.
			in.p.Ban(ctx, "203.0.113.0/24", protect.BanOptions{For: time.Hour})
			in.hook.Take()
			if _, err := in.p.Ban(ctx, "198.51.100.0/24", protect.BanOptions{For: time.Hour}); err != nil {
				t.Fatal(err)
			}
			// One script writes it; then the counters inside it are reset,
			// found by SCAN on each master (none here: nothing to delete).
			if n, names := in.hook.Take(); n < 1 || names[0] != "evalsha" || strings.Trim(strings.ReplaceAll(strings.Join(names[1:], " "), "scan", ""), " ") != "" {
				t.Fatalf("a range ban from a store outside the namespace: %d round trips %v, want evalsha, then scans", n, names)
			}
			in.p.Ban(ctx, "192.0.2.1", protect.BanOptions{}) // a key ban, which listing ranges must not read
			// Range bans are written by the ban script and listed by the
			// ranges script: the first listing also loads that one.
			admin.New(in.p).Bans(ctx, admin.Filter{RangesOnly: true})
			in.hook.Take()
			ranges, err := admin.New(in.p).Bans(ctx, admin.Filter{RangesOnly: true})
			if n, names := in.hook.Take(); n != 1 || strings.Contains(strings.Join(names, " "), "scan") {
				t.Fatalf("Bans(RangesOnly): %d round trips %v, want 1 and no scan", n, names)
			}
			if err != nil || len(ranges) != 2 || ranges[0].Key.String() != "198.51.100.0/24" && ranges[1].Key.String() != "198.51.100.0/24" {
				t.Fatalf("Bans(RangesOnly) = %+v, %v; want the two range bans", ranges, err)
			}
		})
	}
}

// withoutPublished drops the published limits of namespace ns from keys:
// a protector writes them in the background once it has counted, so a
// test that lists keys cannot tell whether they are there yet.
func withoutPublished(keys []string, ns string) []string {
	return slices.DeleteFunc(keys, func(k string) bool { return k == ns+"limits" })
}
