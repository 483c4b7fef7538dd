package storetest

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/httpprotect/protect/store"
)

// The plan tests: Space.TakePlan's token buckets (GCRA), calendar quotas,
// all-or-nothing charging, costs, bans and the stream beside a plan. Every
// time they check is exact on a fake clock and bounded by the calls' spans
// on real time (clock.go); every count, Remaining, Decider and Charged is
// exact on both.

func newPlan(t *testing.T, name string, limits ...store.PlanLimit) *store.Plan {
	t.Helper()
	p, err := store.NewPlan(name, limits...)
	if err != nil {
		t.Fatalf("NewPlan(%q) = %v", name, err)
	}
	return p
}

// takePlan calls sp.TakePlan and fails the test on an error.
func takePlan(t *testing.T, sp store.Space, k store.Key, a netip.Addr, plan *store.Plan, cost int64, stream bool) store.PlanResult {
	t.Helper()
	r, err := sp.TakePlan(t.Context(), k, a, plan, cost, stream)
	if err != nil {
		t.Fatalf("TakePlan(%s, %s, cost %d) = %v", k, plan.Name(), cost, err)
	}
	return r
}

// A full bucket of 5 serves exactly 5; the 6th waits for one token; half a
// token is not enough; a long pause refills the bucket to its capacity
// and no further. The bucket's times count from the first request of a
// burst: it is full then, and each request takes one emission interval.
func testPlanBucket(t *testing.T, env *Env) {
	u := env.Unit
	plan := newPlan(t, "bucket", store.Rate{Name: "burst", Limit: 1, Period: 10 * u, Burst: 5})
	sp := env.space(t, "", limits(u))
	k := store.Key{Name: "cus_bucket"}
	call := func() (store.PlanResult, span) {
		t.Helper()
		return env.takePlanTimed(t, sp, k, netip.Addr{}, plan, 1, false)
	}
	burst := func(when string) span {
		t.Helper()
		var first span
		for i := int64(1); i <= 5; i++ {
			r, s := call()
			if i == 1 {
				first = s
			}
			if r.Refused() || !r.Charged || r.Decider != 0 || r.Limits[0].Remaining != 5-i {
				t.Fatalf("%s: TakePlan(%s, cost 1) #%d = %s, want served and charged with %d left", when, k, i, planResult(r, plan), 5-i)
			}
			if want := less(50*u, first, s); i == 5 && !want.has(r.Limits[0].Reset) {
				t.Fatalf("%s: TakePlan(%s, cost 1) #5: Reset = %v, want %v (5 tokens of %v since the first)", when, k, r.Limits[0].Reset, want, 10*u)
			}
		}
		r, s := call()
		want := less(10*u, first, s)
		if !r.Refused() || r.Charged || r.Decider != 0 || !r.Limits[0].Refused() || r.Limits[0].Remaining != 0 || !want.has(r.Limits[0].RetryAfter) {
			t.Fatalf("%s: TakePlan(%s, cost 1) #6 = %s, want refused, nothing charged, retry after %v", when, k, planResult(r, plan), want)
		}
		return first
	}
	first := burst("full bucket")
	env.Wait(5 * u)
	r, s := call()
	if want := less(10*u, first, s); !r.Refused() || r.Charged || r.Limits[0].Remaining != 0 || !want.has(r.Limits[0].RetryAfter) {
		t.Fatalf("half a token later: TakePlan(%s, cost 1) = %s, want refused, retry after %v", k, planResult(r, plan), want)
	}
	env.Wait(5 * u)
	env.reach(t, first, 10*u)
	if r, _ := call(); r.Refused() || !r.Charged || r.Limits[0].Remaining != 0 {
		t.Fatalf("a whole token later: TakePlan(%s, cost 1) = %s, want served, nothing left", k, planResult(r, plan))
	}
	long := 60 * u
	if env.Now != nil {
		long = 1000 * u
	}
	env.Wait(long)
	burst("after a long pause")
}

// A refused request costs nothing: a client retrying every Unit while
// refused is served as soon as its token is back, not later.
func testPlanRefusedCostsNothing(t *testing.T, env *Env) {
	u := env.Unit
	plan := newPlan(t, "retry", store.Rate{Name: "slow", Limit: 1, Period: 25 * u, Burst: 1})
	sp := env.space(t, "", limits(u))
	k := store.Key{Name: "cus_retry"}
	before := time.Now()
	if r := takePlan(t, sp, k, netip.Addr{}, plan, 1, false); r.Refused() {
		t.Fatalf("first request = %+v, want served", r)
	}
	after := time.Now()
	for i := 1; ; i++ {
		env.Wait(u)
		start := time.Now()
		r := takePlan(t, sp, k, netip.Addr{}, plan, 1, false)
		end := time.Now()
		if env.Now != nil {
			switch {
			case i < 25 && (!r.Refused() || r.Limits[0].RetryAfter != time.Duration(25-i)*u):
				t.Fatalf("retry %d = %+v; want refused, retry after %v", i, r, time.Duration(25-i)*u)
			case i == 25 && r.Refused():
				t.Fatalf("retry 25, when the token is back = %+v; want served", r)
			case i == 25:
				return
			}
			continue
		}
		// Real time: a refusal must come before the token is back, a
		// service after it, as two clocks measure it.
		if r.Refused() && start.Sub(after) >= 25*u+u/2 {
			t.Fatalf("retry %d, %v after the first request: refused %+v; refusals must not delay the token", i, start.Sub(after), r)
		}
		if !r.Refused() {
			if end.Sub(before) < 25*u {
				t.Fatalf("retry %d served %v after the first request, before the token is back (%v)", i, end.Sub(before), 25*u)
			}
			return
		}
	}
}

// Every key has buckets of its own: names, addresses, and namespaces.
func testPlanKeysApart(t *testing.T, env *Env) {
	u := env.Unit
	plan := newPlan(t, "apart", store.Rate{Name: "burst", Limit: 1, Period: 100 * u, Burst: 2})
	sp := env.space(t, "", limits(u))
	acme := store.Key{Name: "acme"}
	for range 2 {
		takePlan(t, sp, acme, netip.Addr{}, plan, 1, false)
	}
	if r := takePlan(t, sp, acme, netip.Addr{}, plan, 1, false); !r.Refused() {
		t.Fatalf("acme's third = %+v, want refused", r)
	}
	host, a := host("192.0.2.10")
	other := env.space(t, "other:", limits(u))
	for _, c := range []struct {
		name string
		sp   store.Space
		k    store.Key
		a    netip.Addr
	}{
		{"globex", sp, store.Key{Name: "globex"}, netip.Addr{}},
		{"an address", sp, host, a},
		{"acme in another namespace", other, acme, netip.Addr{}},
	} {
		if r := takePlan(t, c.sp, c.k, c.a, plan, 1, false); r.Refused() || r.Limits[0].Remaining != 1 {
			t.Fatalf("%s = %+v; want served from a full bucket, 1 left", c.name, r)
		}
	}
}

// A quota refuses once its window's count is used, with a retry at the
// window's end (hourly, daily, monthly, in UTC), and starts over then. Its
// refusals charge nothing, not even the plan's rates. (The rate gains a
// token every 100 units, none during the test, so that its Remaining is
// exact on real time too.)
func testPlanQuota(t *testing.T, env *Env) {
	u := env.Unit
	sp := env.space(t, "", limits(u))
	for _, period := range []store.QuotaPeriod{store.Hourly, store.Daily, store.Monthly} {
		t.Run(period.String(), func(t *testing.T) {
			env.awayFromEnd(period)
			plan := newPlan(t, "quota", store.Rate{Name: "rate", Limit: 1000, Period: 100_000 * u}, store.Quota{Limit: 3, Period: period})
			k := store.Key{Name: "cus_" + period.String()}
			for i := int64(1); i <= 3; i++ {
				r := takePlan(t, sp, k, netip.Addr{}, plan, 1, false)
				if r.Refused() || !r.Charged || r.Decider != 1 || r.Limits[1].Remaining != 3-i || r.Limits[0].Remaining != 1000-i {
					t.Fatalf("TakePlan(%s, cost 1) #%d = %s, want served, the quota deciding with %d left, the rate with %d", k, i, planResult(r, plan), 3-i, 1000-i)
				}
			}
			for i := 4; i <= 6; i++ {
				r, s := env.takePlanTimed(t, sp, k, netip.Addr{}, plan, 1, false)
				want := untilEnd(period, s)
				if !r.Refused() || r.Decider != 1 || !r.Limits[1].Refused() || r.Limits[0].Refused() || r.Charged ||
					!want.has(r.Limits[1].RetryAfter) || !want.has(r.Limits[1].Reset) {
					t.Fatalf("TakePlan(%s, cost 1) #%d = %s, want refused by the quota, retry after and reset in %v", k, i, planResult(r, plan), want)
				}
				if r.Limits[0].Remaining != 997 {
					t.Fatalf("TakePlan(%s, cost 1) #%d: the rate's Remaining = %d, want 997: a quota refusal charged it", k, i, r.Limits[0].Remaining)
				}
			}
			if env.Now == nil {
				return // the window's end is too far off on real time
			}
			now := env.now()
			env.Wait(windowEnd(period, now).Sub(now) - time.Microsecond)
			if r := takePlan(t, sp, k, netip.Addr{}, plan, 1, false); !r.Refused() || r.Limits[1].RetryAfter != time.Microsecond {
				t.Fatalf("a microsecond before the window's end: TakePlan(%s, cost 1) = %s, want refused, retry after 1µs", k, planResult(r, plan))
			}
			env.Wait(time.Microsecond)
			now = env.now()
			r := takePlan(t, sp, k, netip.Addr{}, plan, 1, false)
			if want := windowEnd(period, now).Sub(now); r.Refused() || r.Limits[1].Remaining != 2 || r.Limits[1].Reset != want {
				t.Fatalf("at the window's end (%v): TakePlan(%s, cost 1) = %s, want served, 2 left in the new window, reset in %v", now, k, planResult(r, plan), want)
			}
		})
	}
}

// A request is charged to every limit or to none: a rate's refusal does
// not charge the quota, and when several limits refuse the one with the
// longest wait decides.
func testPlanAllOrNothing(t *testing.T, env *Env) {
	u := env.Unit
	env.awayFromEnd(store.Daily)
	sp := env.space(t, "", limits(u))
	plan := newPlan(t, "both", store.Rate{Name: "burst", Limit: 1, Period: 100 * u, Burst: 2}, store.Quota{Name: "daily", Limit: 100, Period: store.Daily})
	k := store.Key{Name: "cus_both"}
	for range 2 {
		takePlan(t, sp, k, netip.Addr{}, plan, 1, false)
	}
	for i := range 5 {
		r := takePlan(t, sp, k, netip.Addr{}, plan, 1, false)
		if !r.Refused() || r.Decider != 0 || r.Limits[1].Refused() || r.Limits[1].Remaining != 98 || r.Charged {
			t.Fatalf("TakePlan(%s, cost 1), refusal %d = %s, want refused by the rate, the quota still at 98", k, i+1, planResult(r, plan))
		}
	}
	tight := newPlan(t, "tight", store.Rate{Name: "burst", Limit: 1, Period: 100 * u, Burst: 1}, store.Quota{Name: "daily", Limit: 1, Period: store.Daily})
	k2 := store.Key{Name: "cus_tight"}
	_, first := env.takePlanTimed(t, sp, k2, netip.Addr{}, tight, 1, false)
	r, s := env.takePlanTimed(t, sp, k2, netip.Addr{}, tight, 1, false)
	rate, quota := less(100*u, first, s), untilEnd(store.Daily, s)
	decider := 1 // the quota's wait is the longer, unless the day ends sooner than the rate's token comes back
	switch {
	case quota.hi < rate.lo:
		decider = 0
	case quota.lo <= rate.hi:
		decider = r.Decider // too close to tell on real time
	}
	if !r.Limits[0].Refused() || !r.Limits[1].Refused() || r.Charged || r.Decider != decider ||
		!rate.has(r.Limits[0].RetryAfter) || !quota.has(r.Limits[1].RetryAfter) {
		t.Fatalf("TakePlan(%s, cost 1) with both refusing = %s, want the rate (retry after %v) and the quota (%v) refusing, limit %d deciding", k2, planResult(r, tight), rate, quota, decider)
	}
}

// A request of cost n takes n; one that does not fit takes nothing; one
// above the limit's capacity never fits; cost 0 decides for 1 and writes
// nothing. The bucket's times count from the first request, which found
// it full.
func testPlanCost(t *testing.T, env *Env) {
	u := env.Unit
	env.awayFromEnd(store.Daily)
	sp := env.space(t, "", limits(u))
	rate := newPlan(t, "rate", store.Rate{Name: "burst", Limit: 1, Period: 10 * u, Burst: 10})
	k := store.Key{Name: "cus_cost"}
	var first, last span
	for i, c := range []struct {
		cost    int64
		refused bool
		left    int64
		retry   time.Duration // since the first request; -1: never
		wait    time.Duration // a wait before, as the store sees it
	}{
		{4, false, 6, 0, 0},
		{7, true, 6, 10 * u, 0}, // the 7th token is back one interval after the first request
		{6, false, 0, 0, 0},
		{11, true, 0, -1, 0},
		{0, true, 0, 10 * u, 0},
		{0, false, 1, 0, 10 * u},
		{0, false, 1, 0, 0},
		{1, false, 0, 0, 0},
	} {
		env.Wait(c.wait)
		env.reach(t, last, c.wait)
		r, s := env.takePlanTimed(t, sp, k, netip.Addr{}, rate, c.cost, false)
		if i == 0 {
			first = s
		}
		last = s
		st := r.Limits[0]
		var want bound
		switch {
		case c.retry < 0:
			want = exact(-1)
		case c.retry > 0:
			want = less(c.retry, first, s)
		}
		if r.Refused() != c.refused || st.Remaining != c.left || !want.has(st.RetryAfter) || r.Charged != (!c.refused && c.cost > 0) {
			t.Fatalf("TakePlan(%s, cost %d), request %d = %s, want refused %v, %d left, retry after %v", k, c.cost, i+1, planResult(r, rate), c.refused, c.left, want)
		}
	}
	quota := newPlan(t, "quota", store.Quota{Name: "daily", Limit: 5, Period: store.Daily})
	for i, c := range []struct {
		cost    int64
		refused bool
		left    int64
	}{{3, false, 2}, {3, true, 2}, {0, false, 2}, {2, false, 0}, {0, true, 0}, {6, true, 0}} {
		r, s := env.takePlanTimed(t, sp, k, netip.Addr{}, quota, c.cost, false)
		want := exact(0)
		switch {
		case c.cost > 5:
			want = exact(-1)
		case c.refused:
			want = untilEnd(store.Daily, s)
		}
		if r.Refused() != c.refused || r.Limits[0].Remaining != c.left || !want.has(r.Limits[0].RetryAfter) || r.Charged != (!c.refused && c.cost > 0) {
			t.Fatalf("TakePlan(%s, cost %d) under a quota, request %d = %s, want refused %v, %d left, retry after %v", k, c.cost, i+1, planResult(r, quota), c.refused, c.left, want)
		}
	}
}

// A ban on the key, or on a range holding the address, refuses before the
// plan is looked at, and charges nothing.
func testPlanBans(t *testing.T, env *Env) {
	u := env.Unit
	sp := env.space(t, "", limits(u))
	plan := newPlan(t, "bans", store.Rate{Name: "burst", Limit: 1, Period: 100 * u, Burst: 3})
	k := store.Key{Name: "cus_banned"}
	addBan(t, sp, store.Ban{Key: k, Source: store.SourceManual, Reason: "fraud"}, 30*u)
	for _, cost := range []int64{1, 1, 0} {
		if r := takePlan(t, sp, k, netip.Addr{}, plan, cost, false); !r.Banned() || r.Decider != -1 || r.Charged || r.Ban.Reason != "fraud" || !r.Refused() {
			t.Fatalf("TakePlan(banned consumer, cost %d) = %+v; want banned, nothing charged", cost, r)
		}
	}
	if _, ok, err := sp.Lift(t.Context(), k); !ok || err != nil {
		t.Fatalf("Lift(%s) = %v, %v", k, ok, err)
	}
	if r := takePlan(t, sp, k, netip.Addr{}, plan, 1, false); r.Refused() || r.Limits[0].Remaining != 2 {
		t.Fatalf("after the lift = %+v; want served from a full bucket (2 left)", r)
	}
	rng := store.Key{Prefix: netip.MustParsePrefix("198.51.100.0/24")}
	addBan(t, sp, store.Ban{Key: rng, Range: true, Source: store.SourceManual, Reason: "scanner"}, 30*u)
	inside, ia := host("198.51.100.7")
	if r := takePlan(t, sp, inside, ia, plan, 1, true); !r.Banned() || r.Ban.Key != rng || r.Count != 0 {
		t.Fatalf("TakePlan(inside a banned range) = %+v; want banned by the range, nothing counted", r)
	}
	if r := takePlan(t, sp, store.Key{Name: "cus_in_range"}, ia, plan, 1, false); !r.Banned() {
		t.Fatalf("TakePlan(a consumer from a banned range) = %+v; want banned", r)
	}
	outside, oa := host("198.51.101.7")
	if r := takePlan(t, sp, outside, oa, plan, 1, true); r.Banned() || r.Refused() {
		t.Fatalf("TakePlan(outside the range) = %+v; want served", r)
	}
}

// With a stream, the stream counter counts every request, refused by the
// plan or not, and crossing BanLimit bans with Take's escalation: this is
// the test that keeps the escalation repeated in lua/plan.lua equal to
// BanLength. A banned request charges nothing; cost 0 counts nothing.
func testPlanStreamBans(t *testing.T, env *Env) {
	u := env.Unit
	lim := limits(u)
	lim.BanDuration, lim.MaxBanDuration = 5*u, 12*u
	sp := env.space(t, "", lim)
	plan := newPlan(t, "stream", store.Rate{Name: "burst", Limit: 1, Period: 2 * u, Burst: 2})
	k, a := host("203.0.113.50")
	for offense := 1; offense <= 3; offense++ {
		for i := int64(1); i <= 5; i++ {
			r := takePlan(t, sp, k, a, plan, 1, true)
			if r.Banned() || r.Count != i || r.Refused() != (i > 2) || r.Charged != (i <= 2) {
				t.Fatalf("ban %d, request %d = %+v; want count %d, refused %v", offense, i, r, i, i > 2)
			}
		}
		if r := takePlan(t, sp, k, a, plan, 0, true); r.Banned() || r.Count != 5 {
			t.Fatalf("ban %d, cost 0 = %+v; want count 5, nothing counted", offense, r)
		}
		r := takePlan(t, sp, k, a, plan, 1, true)
		want := store.BanLength(&lim, offense)
		if !r.Banned() || !r.NewBan || r.Count != 6 || r.Decider != -1 || r.Charged || r.Ban.Offense != offense || r.BanLeft != want ||
			r.Ban.Source != store.SourceAuto || r.Ban.Reason != "stream passed the ban limit of 5 requests" {
			t.Fatalf("ban %d: request 6 = %+v (ban %+v); want a new ban of %v (BanLength), offense %d", offense, r, r.Ban, want, offense)
		}
		if r := takePlan(t, sp, k, a, plan, 1, true); !r.Banned() || r.NewBan || r.Count != 0 {
			t.Fatalf("ban %d: request 7 = %+v; want banned, nothing counted", offense, r)
		}
		env.Wait(want + u)
	}
	if st, _ := sp.Inspect(t.Context(), k); st.Offenses != 3 {
		t.Fatalf("Inspect.Offenses = %d, want 3", st.Offenses)
	}
	if r := takePlan(t, sp, k, a, plan, 2, true); r.Count != 2 || r.Refused() {
		t.Fatalf("cost 2 = %+v; want count 2, served", r)
	}
	if r := takePlan(t, sp, k, a, plan, 3, true); r.Count != 5 || !r.Refused() || r.Limits[0].RetryAfter >= 0 {
		t.Fatalf("cost 3, above the burst = %+v; want count 5 (the stream counts it), refused for good", r)
	}
}

// A key moved to another plan keeps the state of every limit the two
// share by name: a quota's count, a rate's bucket.
func testPlanChangeKeepsState(t *testing.T, env *Env) {
	u := env.Unit
	sp := env.space(t, "", limits(u))
	free := newPlan(t, "free", store.Rate{Name: "burst", Limit: 1, Period: 100 * u, Burst: 5}, store.Quota{Name: "monthly", Limit: 10, Period: store.Monthly})
	pro := newPlan(t, "pro", store.Rate{Name: "burst", Limit: 10, Period: 100 * u, Burst: 50},
		store.Quota{Name: "monthly", Limit: 1000, Period: store.Monthly}, store.Quota{Name: "daily", Limit: 100, Period: store.Daily})
	k := store.Key{Name: "cus_upgrade"}
	env.awayFromEnd(store.Daily) // a day ends with every month
	for range 4 {
		takePlan(t, sp, k, netip.Addr{}, free, 1, false)
	}
	r := takePlan(t, sp, k, netip.Addr{}, pro, 1, false)
	// The bucket's TAT is 400 units ahead; pro's emission interval is 10
	// units and its depth 500: (500 − 410) / 10 = 9 left.
	if r.Refused() || r.Limits[0].Remaining != 9 || r.Limits[1].Remaining != 995 || r.Limits[2].Remaining != 99 {
		t.Fatalf("under pro = %+v; want burst 9 left, monthly 995 (5 used), daily 99", r)
	}
	if r := takePlan(t, sp, k, netip.Addr{}, free, 0, false); r.Limits[1].Remaining != 5 {
		t.Fatalf("back under free = %+v; want monthly 5 left (5 used)", r)
	}
	// A new limit ahead of a kept one: a store that makes room for it must
	// still charge the kept one, on every request.
	one := newPlan(t, "one", store.Quota{Name: "monthly", Limit: 1000, Period: store.Monthly})
	team := newPlan(t, "team", store.Quota{Name: "hourly", Limit: 50, Period: store.Hourly}, store.Quota{Name: "monthly", Limit: 1000, Period: store.Monthly})
	env.awayFromEnd(store.Hourly)
	k = store.Key{Name: "cus_team"}
	for range 4 {
		takePlan(t, sp, k, netip.Addr{}, one, 1, false)
	}
	for i := range int64(2) {
		r := takePlan(t, sp, k, netip.Addr{}, team, 1, false)
		if r.Refused() || r.Limits[0].Remaining != 49-i || r.Limits[1].Remaining != 995-i {
			t.Fatalf("request %d under team = %+v; want hourly %d left, monthly %d (%d used)", i+1, r, 49-i, 995-i, 5+i)
		}
	}
}

// Inspect reports the limits held for a key: a rate's backlog, a quota's
// window and count; a state is forgotten once it no longer matters.
func testPlanInspect(t *testing.T, env *Env) {
	u := env.Unit
	sp := env.space(t, "", limits(u))
	plan := newPlan(t, "inspect", store.Rate{Name: "burst", Limit: 1, Period: 10 * u, Burst: 3}, store.Quota{Name: "monthly", Limit: 100, Period: store.Monthly})
	k := store.Key{Name: "cus_inspect"}
	if st, err := sp.Inspect(t.Context(), k); err != nil || len(st.Usage) != 0 {
		t.Fatalf("Inspect before any request = %+v, %v; want no limits", st, err)
	}
	env.awayFromEnd(store.Monthly)
	_, took := env.takePlanTimed(t, sp, k, netip.Addr{}, plan, 2, false)
	var st store.KeyState
	var err error
	s := env.timed(t, func() { st, err = sp.Inspect(t.Context(), k) })
	if err != nil || len(st.Usage) != 2 {
		t.Fatalf("Inspect(%s) = %+v, %v; want two limits", k, st, err)
	}
	slices.SortFunc(st.Usage, func(a, b store.LimitUsage) int { return int(a.Period) - int(b.Period) })
	burst, monthly := st.Usage[0], st.Usage[1]
	// Inspect may read a time from a key's expiry, in whole milliseconds:
	// rounded up when written, and on real time down when read later,
	// and late by as long as the call that wrote it took (a TTL counts
	// from the write, not from the clock read before it: miniredis).
	ms := bound{}
	if env.Now == nil {
		ms = bound{-time.Millisecond, time.Millisecond + took.to.Sub(took.from)}
	}
	if want := less(20*u, took, s).plus(ms); burst.Name != "burst" || burst.Period != 0 || burst.Window != "" || burst.Used != 0 || !want.has(burst.Reset) {
		t.Fatalf("Inspect(%s): rate = %+v, want burst with a backlog of %v", k, burst, want)
	}
	want := untilEnd(store.Monthly, s).plus(ms).plus(bound{0, time.Millisecond})
	if window := s.to.Format("2006-01"); monthly.Name != "monthly" || monthly.Period != store.Monthly || monthly.Window != window || monthly.Used != 2 || !want.has(monthly.Reset) {
		t.Fatalf("Inspect(%s): quota = %+v, want monthly, window %s, 2 used, reset in %v", k, monthly, window, want)
	}
	if left, ok := plan.Left(burst); !ok || left != 1 {
		t.Fatalf("plan.Left(burst) = %d, %v; want 1", left, ok)
	}
	if left, ok := plan.Left(monthly); !ok || left != 98 {
		t.Fatalf("plan.Left(monthly) = %d, %v; want 98", left, ok)
	}
	env.Wait(21 * u) // the bucket is full again: its state goes
	if st, err := sp.Inspect(t.Context(), k); err != nil || len(st.Usage) != 1 || st.Usage[0].Name != "monthly" {
		t.Fatalf("Inspect once the bucket is full = %+v, %v; want only the quota", st, err)
	}
}

// 300 concurrent requests against a burst of 100: exactly 100 served, each
// leaving a different number of tokens, 200 refused, no error.
func testPlanConcurrentExactness(t *testing.T, env *Env) {
	u := env.Unit
	sp := env.space(t, "", limits(u))
	plan := newPlan(t, "hot", store.Rate{Name: "burst", Limit: 100, Period: 100_000 * u})
	k := store.Key{Name: "cus_hot"}
	var mu sync.Mutex
	left := map[int64]int{}
	refused, errs := 0, 0
	var wg sync.WaitGroup
	for range 300 {
		wg.Go(func() {
			r, err := sp.TakePlan(t.Context(), k, netip.Addr{}, plan, 1, false)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs++
			case r.Refused():
				refused++
			default:
				left[r.Limits[0].Remaining]++
			}
		})
	}
	wg.Wait()
	if errs != 0 || refused != 200 || len(left) != 100 {
		t.Fatalf("300 concurrent requests: %d errors, %d refused, %d served; want 0, 200, 100", errs, refused, len(left))
	}
	for n := int64(0); n < 100; n++ {
		if left[n] != 1 {
			t.Fatalf("%d left handed out %d times, want once", n, left[n])
		}
	}
}
