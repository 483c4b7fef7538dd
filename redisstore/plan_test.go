package redisstore

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/testclock"
	"github.com/httpprotect/protect/store"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// 300 requests of one consumer, a burst of 100, from three instances on
// one Redis (and on the cluster), one by one or all at once: exactly 100
// served.
func TestRedisPlanThreeInstancesExact(t *testing.T) {
	plan := mustPlan(t, "hot", protect.Rate{Name: "burst", Limit: 100, Period: time.Hour})
	for _, target := range redisTargets {
		for _, concurrent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/concurrent=%v", target.Name, concurrent), func(t *testing.T) {
				addr := target.Addr(t)
				ns := testNamespace(t, addr)
				var inst [3]*instance
				for i := range inst {
					inst[i] = newInstance(t, addr, ns, protect.Config{StoreTimeout: 10 * time.Second}, Options{RangeRefresh: -1})
				}
				got := sendAll(t, 300, concurrent, func(i int) (protect.Decision, error) { return inst[i%3].p.VerifyConsumer(t.Context(), "acme", plan) })
				if got[protect.Allowed] != 100 || got[protect.Limited] != 200 || len(got) != 2 {
					t.Fatalf("got %v; want 100 allowed, 200 limited", got)
				}
			})
		}
	}
}

// One round trip per request, one EVALSHA, whatever the number of limits;
// none for a ban this instance has seen.
func TestRedisPlanRoundTrips(t *testing.T) {
	eight := []protect.PlanLimit{protect.Quota{Limit: 1000, Period: protect.Hourly}, protect.Quota{Limit: 1000, Period: protect.Daily}, protect.Quota{Limit: 1000, Period: protect.Monthly}}
	for i := range 5 {
		eight = append(eight, protect.Rate{Limit: 1000, Period: time.Duration(i+1) * time.Minute})
	}
	plans := []*protect.Plan{
		mustPlan(t, "one", protect.Rate{Limit: 1000, Period: time.Minute}),
		mustPlan(t, "two", protect.Rate{Limit: 1000, Period: time.Minute}, protect.Quota{Limit: 1000, Period: protect.Monthly}),
		mustPlan(t, "eight", eight...),
	}
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			in := newInstance(t, addr, testNamespace(t, addr), protect.Config{StoreTimeout: 10 * time.Second}, Options{RangeRefresh: -1})
			ctx := t.Context()
			in.p.VerifyConsumer(ctx, "warmup", plans[0]) // loads the range bans and the script
			in.hook.Take()
			for _, plan := range plans {
				for i := range 3 {
					d, err := in.p.VerifyConsumerN(ctx, "acme", plan, int64(i))
					if n, names := in.hook.Take(); err != nil || d.Err != nil || n != 1 || len(names) != 1 || names[0] != "evalsha" {
						t.Fatalf("plan %s, cost %d: %d round trips %v (%v %v); want one evalsha", plan.Name(), i, n, names, err, d.Err)
					}
				}
			}
			if _, err := in.p.Ban(ctx, "consumer:acme", protect.BanOptions{}); err != nil {
				t.Fatal(err)
			}
			in.hook.Take()
			in.p.VerifyConsumer(ctx, "acme", plans[2]) // the ban is seen, and cached
			in.hook.Take()
			for range 10 {
				if d, _ := in.p.VerifyConsumer(ctx, "acme", plans[2]); d.Status != protect.Banned {
					t.Fatalf("banned consumer = %v", d.Status)
				}
			}
			if n, names := in.hook.Take(); n != 0 {
				t.Fatalf("a cached ban cost %d round trips %v", n, names)
			}
		})
	}
}

// A protector with Config.Plan on addresses on Redis: the plan and the
// stream in one round trip, and a client hammering through the refusals
// is banned as on the memory store.
func TestRedisConfigPlanOnAddresses(t *testing.T) {
	plan := mustPlan(t, "login", protect.Rate{Name: "login", Limit: 5, Period: time.Minute})
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			in := newInstance(t, addr, testNamespace(t, addr), protect.Config{Plan: plan, BanLimit: 20, StoreTimeout: 10 * time.Second}, Options{RangeRefresh: -1})
			ctx := t.Context()
			a := netip.MustParseAddr("203.0.113.9")
			in.p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.1"))
			in.hook.Take()
			for i := int64(1); i <= 21; i++ {
				d, _ := in.p.VerifyAddr(ctx, a)
				if n, names := in.hook.Take(); n != 1 || names[0] != "evalsha" {
					t.Fatalf("request %d: %d round trips %v", i, n, names)
				}
				var want protect.Status
				switch {
				case i == 21:
					want = protect.Banned
				case i > 5:
					want = protect.Limited
				}
				if d.Status != want || d.Count != i || d.Err != nil {
					t.Fatalf("request %d = %v count %d (%v); want %v", i, d.Status, d.Count, d.Err, want)
				}
				if i == 6 && (d.RetryAfter <= 11*time.Second || d.RetryAfter > 12*time.Second || headers(d).Get("Retry-After") != "12") {
					t.Fatalf("request 6: retry after %v, header %q; want 12s", d.RetryAfter, headers(d).Get("Retry-After"))
				}
				if i == 21 && (d.Ban == nil || d.Ban.Offense != 1 || d.RetryAfter != time.Hour) {
					t.Fatalf("request 21: ban %+v, retry after %v", d.Ban, d.RetryAfter)
				}
			}
		})
	}
}

// The keys of a plan: named <ns>{<consumer key>}:r:<name> and
// :q:<name>:<window>, in one slot, every one expiring by itself; a secret
// consumer is never in a key name.
func TestRedisPlanKeys(t *testing.T) {
	plan := mustPlan(t, "pro", protect.Rate{Name: "burst", Limit: 10, Period: time.Second, Burst: 20},
		protect.Quota{Name: "hourly", Limit: 1000, Period: protect.Hourly}, protect.Quota{Name: "daily", Limit: 1000, Period: protect.Daily}, protect.Quota{Name: "monthly", Limit: 1000, Period: protect.Monthly})
	const secret = "sk_live_0123456789abcdefghij"
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			ns := testNamespace(t, addr)
			in := newInstance(t, addr, ns, protect.Config{}, Options{RangeRefresh: -1})
			ctx := t.Context()
			for _, c := range []string{"acme", secret} {
				if d, err := in.p.VerifyConsumer(ctx, c, plan); err != nil || d.Err != nil || d.Status != protect.Allowed {
					t.Fatalf("VerifyConsumer(%q) = %v %v %v", c, d.Status, err, d.Err)
				}
			}
			now := time.Now().UTC() // the server's clock, on this machine
			c := in.store.Client()
			keys, err := allKeys(ctx, c, globEscape(ns)+"*")
			if err != nil {
				t.Fatal(err)
			}
			keys = withoutPublished(keys, ns)
			slices.Sort(keys)
			hashed := protect.ConsumerKey(secret).Name
			var want []string
			for _, k := range []string{"acme", hashed} {
				base := ns + "{" + k + "}"
				want = append(want, base+":q:daily:"+now.Format("2006-01-02"), base+":q:hourly:"+now.Format("2006-01-02T15"),
					base+":q:monthly:"+now.Format("2006-01"), base+":r:burst")
			}
			slices.Sort(want)
			if fmt.Sprint(keys) != fmt.Sprint(want) {
				t.Fatalf("keys = %v\nwant   %v", keys, want)
			}
			for _, k := range keys {
				if strings.Contains(k, "sk_live") {
					t.Fatalf("a secret in a key name: %s", k)
				}
				if ttl, err := c.PTTL(ctx, k).Result(); err != nil || ttl <= 0 {
					t.Fatalf("PTTL(%s) = %v, %v; every key must expire by itself", k, ttl, err)
				}
			}
			if ttl, _ := c.PTTL(ctx, ns+"{acme}:r:burst").Result(); ttl > 100*time.Millisecond {
				t.Fatalf("the bucket's key lives %v; want the 0.1s its one token takes to come back", ttl)
			}
			if cc, ok := c.(*redis.ClusterClient); ok {
				slots := map[int64]bool{}
				for _, k := range keys[:4] {
					slots[cc.ClusterKeySlot(ctx, k).Val()] = true
				}
				if len(slots) != 1 {
					t.Fatalf("one consumer's keys in %d slots", len(slots))
				}
			}
			// protectctl's view: the stored limits, through Inspect. The
			// bucket's key ends a tenth of a second after one request, so
			// spend more of the burst first to keep it alive past a slow
			// machine's pause.
			for range 15 {
				if d, err := in.p.VerifyConsumer(ctx, "acme", plan); err != nil || d.Status != protect.Allowed {
					t.Fatalf("VerifyConsumer(acme) = %v, %v; want Allowed", d.Status, err)
				}
			}
			st, err := admin.New(in.p).InspectKey(ctx, protect.Key{Name: "acme"})
			if err != nil || len(st.Usage) != 4 {
				t.Fatalf("Inspect = %+v, %v; want 4 limits", st, err)
			}
		})
	}
}

// The calendar of the Redis script (days from civil dates, in Lua) agrees
// with Go's time package, and the memory store with both, at instants
// chosen to hurt: month and year ends, 29 February, a century that is
// not a leap year, the last microsecond of a window.
func TestPlanCalendarAgrees(t *testing.T) {
	instants := []time.Time{
		time.Date(2026, 11, 30, 23, 59, 59, 999999000, time.UTC),
		time.Date(2026, 12, 31, 23, 30, 0, 0, time.UTC),
		time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2028, 2, 28, 12, 0, 0, 0, time.UTC),
		time.Date(2028, 2, 29, 23, 59, 59, 0, time.UTC),
		time.Date(2100, 2, 28, 22, 0, 0, 0, time.UTC),
		time.Date(2000, 2, 29, 1, 2, 3, 0, time.UTC),
		time.Date(2026, 7, 31, 5, 0, 0, 0, time.UTC),
		time.Date(2038, 1, 19, 3, 14, 8, 0, time.UTC),
	}
	plan := mustPlan(t, "cal", protect.Quota{Name: "h", Limit: 10, Period: protect.Hourly}, protect.Quota{Name: "d", Limit: 10, Period: protect.Daily}, protect.Quota{Name: "m", Limit: 10, Period: protect.Monthly})
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	rs := New(c, Options{RangeRefresh: -1, Logger: discardLogger()})
	t.Cleanup(func() { rs.Close() })
	for i, at := range instants {
		clk := testclock.At(at)
		ms := protect.NewMemoryStore(protect.MemoryOptions{Clock: clk.Now, SweepInterval: -1})
		t.Cleanup(func() { ms.Close() })
		m.SetTime(at)
		k := protect.Key{Name: fmt.Sprintf("cus_%d", i)}
		for name, st := range map[string]protect.Store{"memory": ms, "redis": rs} {
			sp, err := st.Space(store.Scope{Namespace: "cal:", Limits: store.Limits{TTL: time.Second, BanLimit: -1, BanDuration: time.Hour, BanFactor: 2, MaxBanDuration: time.Hour, OffenseWindow: time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			r, err := sp.TakePlan(t.Context(), k, netip.Addr{}, plan, 1, false)
			if err != nil {
				t.Fatal(err)
			}
			for j, p := range []protect.QuotaPeriod{protect.Hourly, protect.Daily, protect.Monthly} {
				want := windowEnd(p, at).Sub(at)
				if r.Limits[j].Reset != want {
					t.Errorf("%s at %v: %v window ends in %v, want %v", name, at, p, r.Limits[j].Reset, want)
				}
			}
			usage, err := sp.Inspect(context.Background(), k)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, u := range usage.Usage {
				got[u.Name] = u.Window
			}
			want := map[string]string{"h": at.Format("2006-01-02T15"), "d": at.Format("2006-01-02"), "m": at.Format("2006-01")}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s at %v: windows %v, want %v", name, at, got, want)
			}
		}
	}
}

// windowEnd is the end of the calendar window of p that holds at, in UTC.
func windowEnd(p protect.QuotaPeriod, at time.Time) time.Time {
	y, mo, d := at.Date()
	switch p {
	case protect.Hourly:
		return at.Truncate(time.Hour).Add(time.Hour)
	case protect.Daily:
		return time.Date(y, mo, d+1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(y, mo+1, 1, 0, 0, 0, 0, time.UTC)
}

// ConsumerFunc on Redis: the client address's range ban applies to a
// consumer too (answered for the address, before the consumer is looked
// at), with no round trip once the ranges are loaded.
func TestRedisConsumerFuncRangeBan(t *testing.T) {
	plan := mustPlan(t, "p", protect.Rate{Limit: 10, Period: time.Second})
	m := miniredis.RunT(t)
	in := newInstance(t, m.Addr(), "cf:", protect.Config{ConsumerFunc: func(r *http.Request) (string, *protect.Plan, bool) {
		return r.Header.Get("X-Consumer"), plan, true
	}}, Options{RangeRefresh: -1})
	ctx := t.Context()
	if _, err := in.p.Ban(ctx, "198.51.100.0/24", protect.BanOptions{Reason: "scanner"}); err != nil {
		t.Fatal(err)
	}
	r := request("198.51.100.7:1000")
	r.Header.Set("X-Consumer", "acme")
	in.p.Verify(ctx, r) // loads the ranges
	in.hook.Take()
	if d := verify(t, in.p, r); d.Status != protect.Banned || d.Ban == nil || d.Ban.Reason != "scanner" || d.Key.String() != "198.51.100.7" {
		t.Fatalf("consumer from a banned range = %v %+v", d.Status, d)
	}
	if n, names := in.hook.Take(); n != 0 {
		t.Fatalf("a range ban cost %d round trips %v", n, names)
	}
}

// When Redis fails, a plan follows OnStoreError as the stream does: open
// serves, closed refuses with 503, local keeps holding the consumer to its
// plan in this process; the circuit breaker spares Redis the calls.
func TestRedisPlanOutage(t *testing.T) {
	const timeout = 100 * time.Millisecond
	plan := mustPlan(t, "p", protect.Rate{Name: "burst", Limit: 1, Period: time.Hour, Burst: 3})
	for _, policy := range []protect.FailurePolicy{protect.FailOpen, protect.FailClosed, protect.FailLocal} {
		t.Run(policy.String(), func(t *testing.T) {
			addr, pause, _ := startRedisServer(t)
			in := newInstance(t, addr, "protect:", protect.Config{StoreTimeout: timeout, OnStoreError: policy}, Options{RangeRefresh: -1})
			ctx := t.Context()
			if d, _ := in.p.VerifyConsumer(ctx, "acme", plan); d.Status != protect.Allowed || d.Err != nil {
				t.Fatalf("before the outage: %v %v", d.Status, d.Err)
			}
			pause()
			in.hook.Take()
			var got []protect.Status
			for i := range 5 {
				d, err := in.p.VerifyConsumer(ctx, "acme", plan)
				if err != nil || d.Err == nil {
					t.Fatalf("request %d: %v %v; want the store error absorbed", i, err, d.Err)
				}
				got = append(got, d.Status)
			}
			if _, names := in.hook.Take(); strings.Count(strings.Join(names, " "), "evalsha") != breakerThreshold {
				t.Fatalf("calls that reached the stalled Redis: %v; want %d", names, breakerThreshold)
			}
			want := map[protect.FailurePolicy]string{
				protect.FailOpen:   "[allowed allowed allowed allowed allowed]",
				protect.FailClosed: "[unavailable unavailable unavailable unavailable unavailable]",
				protect.FailLocal:  "[allowed allowed allowed limited limited]", // a fresh local bucket of 3
			}[policy]
			if fmt.Sprint(got) != want {
				t.Fatalf("%v: %v, want %s", policy, got, want)
			}
		})
	}
}

// The arguments a store prepares for each plan are bounded in number: a
// service that makes a plan per request (a customer's override read from
// a database) does not grow the store without end.
func TestPlanArgsBounded(t *testing.T) {
	m := miniredis.RunT(t)
	in := newInstance(t, m.Addr(), "pa:", protect.Config{}, Options{RangeRefresh: -1})
	for i := range maxPlanArgs + 100 {
		plan := mustPlan(t, "pro", protect.Rate{Limit: 10, Period: time.Second})
		if d, err := in.p.VerifyConsumer(t.Context(), fmt.Sprintf("c%d", i), plan); err != nil || d.Status != protect.Allowed {
			t.Fatalf("VerifyConsumer(c%d) = %v, %v; want allowed", i, d.Status, err)
		}
	}
	n := 0
	in.store.plans.Range(func(_, _ any) bool { n++; return true })
	if n > maxPlanArgs {
		t.Fatalf("plans prepared after %d plans = %d, want at most %d", maxPlanArgs+100, n, maxPlanArgs)
	}
}
