package protect

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// 300 requests of one consumer, a burst of 100, from three instances on
// one Redis (and on the cluster), one by one or all at once: exactly 100
// served.
func TestRedisPlanThreeInstancesExact(t *testing.T) {
	plan := mustPlan(t, "hot", Rate{Name: "burst", Limit: 100, Period: time.Hour})
	for _, target := range redisTargets {
		for _, concurrent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/concurrent=%v", target.name, concurrent), func(t *testing.T) {
				addr := target.addr(t)
				ns := testNamespace(t, addr)
				var inst [3]*instance
				for i := range inst {
					inst[i] = newInstance(t, addr, ns, Config{StoreTimeout: 10 * time.Second}, RedisOptions{RangeRefresh: -1})
				}
				got := sendAll(t, 300, concurrent, func(i int) (Decision, error) { return inst[i%3].p.VerifyConsumer(t.Context(), "acme", plan) })
				if got[Allowed] != 100 || got[Limited] != 200 || len(got) != 2 {
					t.Fatalf("got %v; want 100 allowed, 200 limited", got)
				}
			})
		}
	}
}

// One round trip per request, one EVALSHA, whatever the number of limits;
// none for a ban this instance has seen.
func TestRedisPlanRoundTrips(t *testing.T) {
	eight := []PlanLimit{Quota{Limit: 1000, Period: Hourly}, Quota{Limit: 1000, Period: Daily}, Quota{Limit: 1000, Period: Monthly}}
	for i := range 5 {
		eight = append(eight, Rate{Limit: 1000, Period: time.Duration(i+1) * time.Minute})
	}
	plans := []*Plan{
		mustPlan(t, "one", Rate{Limit: 1000, Period: time.Minute}),
		mustPlan(t, "two", Rate{Limit: 1000, Period: time.Minute}, Quota{Limit: 1000, Period: Monthly}),
		mustPlan(t, "eight", eight...),
	}
	for _, target := range redisTargets {
		t.Run(target.name, func(t *testing.T) {
			addr := target.addr(t)
			in := newInstance(t, addr, testNamespace(t, addr), Config{StoreTimeout: 10 * time.Second}, RedisOptions{RangeRefresh: -1})
			ctx := t.Context()
			in.p.VerifyConsumer(ctx, "warmup", plans[0]) // loads the range bans and the script
			in.hook.take()
			for _, plan := range plans {
				for i := range 3 {
					d, err := in.p.VerifyConsumerN(ctx, "acme", plan, int64(i))
					if n, names := in.hook.take(); err != nil || d.Err != nil || n != 1 || len(names) != 1 || names[0] != "evalsha" {
						t.Fatalf("plan %s, cost %d: %d round trips %v (%v %v); want one evalsha", plan.Name(), i, n, names, err, d.Err)
					}
				}
			}
			if _, err := in.p.Ban(ctx, "consumer:acme", BanOptions{}); err != nil {
				t.Fatal(err)
			}
			in.hook.take()
			in.p.VerifyConsumer(ctx, "acme", plans[2]) // the ban is seen, and cached
			in.hook.take()
			for range 10 {
				if d, _ := in.p.VerifyConsumer(ctx, "acme", plans[2]); d.Status != Banned {
					t.Fatalf("banned consumer = %v", d.Status)
				}
			}
			if n, names := in.hook.take(); n != 0 {
				t.Fatalf("a cached ban cost %d round trips %v", n, names)
			}
		})
	}
}

// A protector with Config.Plan on addresses on Redis: the plan and the
// stream in one round trip, and a client hammering through the refusals
// is banned as on the memory store.
func TestRedisConfigPlanOnAddresses(t *testing.T) {
	plan := mustPlan(t, "login", Rate{Name: "login", Limit: 5, Period: time.Minute})
	for _, target := range redisTargets {
		t.Run(target.name, func(t *testing.T) {
			addr := target.addr(t)
			in := newInstance(t, addr, testNamespace(t, addr), Config{Plan: plan, BanLimit: 20, StoreTimeout: 10 * time.Second}, RedisOptions{RangeRefresh: -1})
			ctx := t.Context()
			a := netip.MustParseAddr("203.0.113.9")
			in.p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.1"))
			in.hook.take()
			for i := int64(1); i <= 21; i++ {
				d, _ := in.p.VerifyAddr(ctx, a)
				if n, names := in.hook.take(); n != 1 || names[0] != "evalsha" {
					t.Fatalf("request %d: %d round trips %v", i, n, names)
				}
				var want Status
				switch {
				case i == 21:
					want = Banned
				case i > 5:
					want = Limited
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
	plan := mustPlan(t, "pro", Rate{Name: "burst", Limit: 10, Period: time.Second, Burst: 20},
		Quota{Name: "hourly", Limit: 1000, Period: Hourly}, Quota{Name: "daily", Limit: 1000, Period: Daily}, Quota{Name: "monthly", Limit: 1000, Period: Monthly})
	const secret = "sk_live_0123456789abcdefghij"
	for _, target := range redisTargets {
		t.Run(target.name, func(t *testing.T) {
			addr := target.addr(t)
			ns := testNamespace(t, addr)
			in := newInstance(t, addr, ns, Config{}, RedisOptions{RangeRefresh: -1})
			ctx := t.Context()
			for _, c := range []string{"acme", secret} {
				if d, err := in.p.VerifyConsumer(ctx, c, plan); err != nil || d.Err != nil || d.Status != Allowed {
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
			hashed := ConsumerKey(secret).Name
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
			// protectctl's view: the stored limits, through Inspect.
			st, err := in.p.Inspect(ctx, Key{Name: "acme"})
			if err != nil || len(st.Limits) != 4 {
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
	plan := mustPlan(t, "cal", Quota{Name: "h", Limit: 10, Period: Hourly}, Quota{Name: "d", Limit: 10, Period: Daily}, Quota{Name: "m", Limit: 10, Period: Monthly})
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	rs := NewRedisStore(c, RedisOptions{RangeRefresh: -1, Logger: discardLogger()})
	t.Cleanup(func() { rs.Close() })
	for i, at := range instants {
		clk := &fakeClock{t: at}
		ms := NewMemoryStore(MemoryOptions{Clock: clk.Now, SweepInterval: -1})
		t.Cleanup(func() { ms.Close() })
		m.SetTime(at)
		k := Key{Name: fmt.Sprintf("cus_%d", i)}
		for name, st := range map[string]Store{"memory": ms, "redis": rs} {
			sp, err := st.Space(Scope{Namespace: "cal:", Limits: Limits{TTL: time.Second, BanLimit: -1, BanDuration: time.Hour, BanFactor: 2, MaxBanDuration: time.Hour, OffenseWindow: time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			r, err := sp.TakePlan(t.Context(), k, netip.Addr{}, plan, 1, false)
			if err != nil {
				t.Fatal(err)
			}
			for j, p := range []QuotaPeriod{Hourly, Daily, Monthly} {
				want := time.Duration(p.windowEnd(at.UnixMicro())-at.UnixMicro()) * time.Microsecond
				if r.Limits[j].Reset != want {
					t.Errorf("%s at %v: %v window ends in %v, want %v", name, at, p, r.Limits[j].Reset, want)
				}
			}
			usage, err := sp.Inspect(context.Background(), k)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, u := range usage.Limits {
				got[u.Name] = u.Window
			}
			want := map[string]string{"h": at.Format("2006-01-02T15"), "d": at.Format("2006-01-02"), "m": at.Format("2006-01")}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s at %v: windows %v, want %v", name, at, got, want)
			}
		}
	}
	// Go's windowEnd itself, against time.Date.
	for _, at := range instants {
		y, mo, d := at.Date()
		for p, want := range map[QuotaPeriod]time.Time{
			Hourly:  at.Truncate(time.Hour).Add(time.Hour),
			Daily:   time.Date(y, mo, d+1, 0, 0, 0, 0, time.UTC),
			Monthly: time.Date(y, mo+1, 1, 0, 0, 0, 0, time.UTC),
		} {
			if got := p.windowEnd(at.UnixMicro()); got != want.UnixMicro() {
				t.Errorf("%v.windowEnd(%v) = %v, want %v", p, at, time.UnixMicro(got).UTC(), want)
			}
		}
	}
}

// ConsumerFunc on Redis: the client address's range ban applies to a
// consumer too (answered for the address, before the consumer is looked
// at), with no round trip once the ranges are loaded.
func TestRedisConsumerFuncRangeBan(t *testing.T) {
	plan := mustPlan(t, "p", Rate{Limit: 10, Period: time.Second})
	m := miniredis.RunT(t)
	in := newInstance(t, m.Addr(), "cf:", Config{ConsumerFunc: func(r *http.Request) (string, *Plan, bool) {
		return r.Header.Get("X-Consumer"), plan, true
	}}, RedisOptions{RangeRefresh: -1})
	ctx := t.Context()
	if _, err := in.p.Ban(ctx, "198.51.100.0/24", BanOptions{Reason: "scanner"}); err != nil {
		t.Fatal(err)
	}
	r := request("198.51.100.7:1000")
	r.Header.Set("X-Consumer", "acme")
	in.p.Verify(ctx, r) // loads the ranges
	in.hook.take()
	if d := verify(t, in.p, r); d.Status != Banned || d.Ban == nil || d.Ban.Reason != "scanner" || d.Key.String() != "198.51.100.7" {
		t.Fatalf("consumer from a banned range = %v %+v", d.Status, d)
	}
	if n, names := in.hook.take(); n != 0 {
		t.Fatalf("a range ban cost %d round trips %v", n, names)
	}
}

// When Redis fails, a plan follows OnStoreError as the stream does: open
// serves, closed refuses with 503, local keeps holding the consumer to its
// plan in this process; the circuit breaker spares Redis the calls.
func TestRedisPlanOutage(t *testing.T) {
	const timeout = 100 * time.Millisecond
	plan := mustPlan(t, "p", Rate{Name: "burst", Limit: 1, Period: time.Hour, Burst: 3})
	for _, policy := range []FailurePolicy{FailOpen, FailClosed, FailLocal} {
		t.Run(policy.String(), func(t *testing.T) {
			addr, pause, _ := startRedisServer(t)
			in := newInstance(t, addr, "protect:", Config{StoreTimeout: timeout, OnStoreError: policy}, RedisOptions{RangeRefresh: -1})
			ctx := t.Context()
			if d, _ := in.p.VerifyConsumer(ctx, "acme", plan); d.Status != Allowed || d.Err != nil {
				t.Fatalf("before the outage: %v %v", d.Status, d.Err)
			}
			pause()
			in.hook.take()
			var got []Status
			for i := range 5 {
				d, err := in.p.VerifyConsumer(ctx, "acme", plan)
				if err != nil || d.Err == nil {
					t.Fatalf("request %d: %v %v; want the store error absorbed", i, err, d.Err)
				}
				got = append(got, d.Status)
			}
			if _, names := in.hook.take(); strings.Count(strings.Join(names, " "), "evalsha") != breakerThreshold {
				t.Fatalf("calls that reached the stalled Redis: %v; want %d", names, breakerThreshold)
			}
			want := map[FailurePolicy]string{
				FailOpen:   "[allowed allowed allowed allowed allowed]",
				FailClosed: "[unavailable unavailable unavailable unavailable unavailable]",
				FailLocal:  "[allowed allowed allowed limited limited]", // a fresh local bucket of 3
			}[policy]
			if fmt.Sprint(got) != want {
				t.Fatalf("%v: %v, want %s", policy, got, want)
			}
		})
	}
}
