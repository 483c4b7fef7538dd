// Package storetest checks that a store.Store keeps the contract the
// Protector relies on, as testing/fstest checks a file system. Whoever
// writes a store (on Postgres, DynamoDB, or anything else) runs it from a
// test, on real time:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s := newMyStore(t) // a fresh, empty store for each test
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// or, when the store's clock can be injected, with RunEnv and an Env
// whose Wait moves that clock and whose Now tells it: the suite then runs
// in no time and checks every time to the microsecond.
//
// What it checks: Take's counts, their expiry and the ban written past
// BanLimit, escalating by store.BanLength; manual key, range and
// consumer bans, their listing (BanFilter), inspection and lifting, and
// the counters a ban resets; namespaces and ban namespaces kept apart and
// shared as Scope says, ErrLimitsDiffer and Publish; TakePlan's token
// buckets, calendar quotas, costs and all-or-nothing charging, bans and
// the stream beside a plan; that concurrent calls on one key see
// every count exactly once; and, for a store whose spaces are a
// store.Journal, the events of bans written, lifted and over, and their
// cursors; and, for a store that keeps them across a restart
// (Env.Reopen), that a reader's bookmark and cursor read on after it.
//
// On real time a store reads its clock at moments the suite cannot see,
// so every time it reports (a RetryAfter, a Reset) is checked against
// bounds: the real time before and after the calls it depends on, and the
// store's own clock just before each (the Created of a ban the suite
// writes in Namespace+"clock:"). The bounds are as wide as the calls took
// and the clock lagged, never a fixed tolerance; counts, Remaining, which
// limit decided and whether a request was charged are exact on either
// clock. Each test takes a few dozen Units (Env.Unit, 40ms on real time):
// the whole suite takes some seconds.
//
// A store needs nothing but store.Store and store.Space to pass. Of the
// optional interfaces of package store the suite checks Journal where a
// space has it (a store without it skips that test); the others
// (LocalSpace, DeadlineSpace, BanHolder, BanPager, RangeBanCounter,
// CircuitStore) are not used by the suite; a store that has them is checked by the suite for the contract,
// and by its own tests, through a Protector, for what they promise (as
// protect's stores are: a Protector whose store fails must still refuse
// the bans a BanHolder holds). To be sure a result does not depend on
// them, run the suite on the store behind a wrapper that hides them, as
// the example shows.
//
// The suite is what protect's own stores pass — the memory store, Redis
// through miniredis, a real redis-server and a Redis Cluster, on a fake
// clock and on real time — so a store that passes it gives a Protector
// exact counts, escalating bans and working lifts.
package storetest

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpprotect/protect/store"
)

// An Env is one store under test, and the means to let time pass as the
// store sees it.
type Env struct {
	// Store is the store under test. The suite does not close it: close it
	// in a t.Cleanup.
	Store store.Store
	// Namespace is where the suite writes ["storetest:"]. On a server that
	// several tests share, give each test a namespace of its own.
	Namespace string
	// Wait lets d pass as the store sees it [time.Sleep]. A store with an
	// injectable clock moves its clock here, and the suite runs in no
	// time.
	Wait func(d time.Duration)
	// Unit is the suite's "second": every TTL and ban length is a multiple
	// of it [1s with Wait set, 40ms with real time]. Keep it well above the
	// store's clock resolution and its round trip.
	Unit time.Duration
	// Now tells the time as the store sees it, when Wait moves a clock the
	// test controls [nil: real time]. With it the plan tests check every
	// time to the microsecond and wait for a calendar window to end; on
	// real time they allow for the time that passes, and leave out the
	// month's end.
	Now func() time.Time
	// Lag is how far behind the real time the store's clock may be when
	// it reads it, on real time (Now nil): a clock in whole microseconds
	// lags by up to 1µs [1ms]. The suite bounds each time it checks by
	// the real time before (less Lag) and after the calls it depends on,
	// and by the store's own clock (the Created of a ban it writes in a
	// namespace of the suite's, Namespace+"clock:") just before each, so a
	// clock that lags by more is allowed for as far as it is seen to lag,
	// and no further. Ignored with Now: then every time is exact.
	Lag time.Duration
	// Reopen closes Store and returns the store again as a restart makes
	// it, on what Store kept (its state file, its server), for the tests
	// of what a restart keeps [nil: they are skipped]. The suite does not
	// close what it returns either.
	Reopen func(t *testing.T) store.Store

	probe store.Space // where storeNow writes, once bound
}

// Run runs the suite on stores made by newStore, one per test, on real
// time.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	RunEnv(t, func(t *testing.T) Env { return Env{Store: newStore(t)} })
}

// RunEnv runs the suite on environments made by newEnv, one per test.
func RunEnv(t *testing.T, newEnv func(t *testing.T) Env) {
	t.Helper()
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			env := newEnv(t)
			if env.Namespace == "" {
				env.Namespace = "storetest:"
			}
			if env.Unit == 0 {
				env.Unit = time.Second
				if env.Wait == nil {
					env.Unit = 40 * time.Millisecond
				}
			}
			if env.Wait == nil {
				env.Wait = time.Sleep
			}
			switch {
			case env.Now != nil:
				env.Lag = 0
			case env.Lag == 0:
				env.Lag = time.Millisecond
			}
			test.run(t, &env)
		})
	}
}

var tests = []struct {
	name string
	run  func(*testing.T, *Env)
}{
	{"Thresholds", testThresholds},
	{"CountN", testCountN},
	{"DecideWithoutCounting", testDecideWithoutCounting},
	{"Expiry", testExpiry},
	{"Escalation", testEscalation},
	{"ManualBans", testManualBans},
	{"KeyBanResetsCounter", testKeyBanResetsCounter},
	{"RangeBanResetsCounters", testRangeBanResetsCounters},
	{"Filters", testFilters},
	{"Namespaces", testNamespaces},
	{"BanNamespaces", testBanNamespaces},
	{"ConcurrentExactness", testConcurrentExactness},
	{"ListsEveryBan", testListsEveryBan},
	{"Journal", testJournal},
	{"Allowlist", testAllowlist},
	{"Bookmarks", testBookmarks},
	{"JournalRestart", testJournalRestart},
	{"PlanBucket", testPlanBucket},
	{"PlanRefusedCostsNothing", testPlanRefusedCostsNothing},
	{"PlanKeysApart", testPlanKeysApart},
	{"PlanQuota", testPlanQuota},
	{"PlanAllOrNothing", testPlanAllOrNothing},
	{"PlanCost", testPlanCost},
	{"PlanBans", testPlanBans},
	{"PlanStreamBans", testPlanStreamBans},
	{"PlanChangeKeepsState", testPlanChangeKeepsState},
	{"PlanInspect", testPlanInspect},
	{"PlanConcurrentExactness", testPlanConcurrentExactness},
}

// limits are the suite's limits in units of u.
func limits(u time.Duration) store.Limits {
	return store.Limits{TTL: 10 * u, BanLimit: 5, BanDuration: 60 * u, BanFactor: 2, MaxBanDuration: 150 * u, OffenseWindow: 1000 * u}
}

// space binds the environment's store to its namespace (plus suffix) and
// lim.
func (env *Env) space(t *testing.T, suffix string, lim store.Limits) store.Space {
	t.Helper()
	sp, err := env.Store.Space(store.Scope{Namespace: env.Namespace + suffix, Limits: lim})
	if err != nil {
		t.Fatalf("Space(%q) = %v", env.Namespace+suffix, err)
	}
	return sp
}

func host(s string) (store.Key, netip.Addr) {
	a := netip.MustParseAddr(s)
	return store.Key{Prefix: netip.PrefixFrom(a, a.BitLen())}, a
}

// take calls sp.Take and fails the test on an error.
func take(t *testing.T, sp store.Space, k store.Key, a netip.Addr, n int64) store.Result {
	t.Helper()
	r, err := sp.Take(t.Context(), k, a, n)
	if err != nil {
		t.Fatalf("Take(%s, %d) = %v", k, n, err)
	}
	return r
}

func addBan(t *testing.T, sp store.Space, b store.Ban, length time.Duration) store.Ban {
	t.Helper()
	stored, err := sp.AddBan(t.Context(), b, length)
	if err != nil {
		t.Fatalf("AddBan(%s) = %v", b.Key, err)
	}
	return stored
}

func bans(t *testing.T, sp store.Space, f store.BanFilter) []store.Ban {
	t.Helper()
	list, err := sp.Bans(t.Context(), f)
	if err != nil {
		t.Fatalf("Bans(%+v) = %v", f, err)
	}
	store.SortBans(list)
	return list
}

func keys(list []store.Ban) []string {
	out := make([]string, len(list))
	for i, b := range list {
		out[i] = b.Key.String()
	}
	return out
}

// The count passing BanLimit (> BanLimit, not >=) writes the ban, and a
// negative BanLimit never bans.
func testThresholds(t *testing.T, env *Env) {
	lim := limits(env.Unit)
	sp := env.space(t, "", lim)
	k, a := host("192.0.2.1")
	for i := int64(1); i <= 5; i++ {
		if r := take(t, sp, k, a, 1); r.Count != i || r.Banned() {
			t.Fatalf("Take #%d = %+v, want count %d, not banned", i, r, i)
		}
	}
	r := take(t, sp, k, a, 1)
	if !r.Banned() || !r.NewBan || r.Count != 6 || r.Ban.Offense != 1 || r.Ban.Source != store.SourceAuto ||
		r.Ban.Key != k || r.Ban.Range || r.BanLeft != lim.BanDuration || !r.Ban.Expires.Equal(r.Ban.Created.Add(lim.BanDuration)) {
		t.Fatalf("Take #6 = %+v (ban %+v), want a new ban of %v, offense 1, count 6", r, r.Ban, lim.BanDuration)
	}
	if r := take(t, sp, k, a, 1); !r.Banned() || r.NewBan || r.Count != 0 || r.Ban.Reason != "stream passed the ban limit of 5 requests" {
		t.Fatalf("Take #7 = %+v, want banned by the existing ban, nothing counted", r)
	}
	never := lim
	never.BanLimit = -1
	sp = env.space(t, "never:", never)
	k2, a2 := host("192.0.2.2")
	for range 19 {
		take(t, sp, k2, a2, 1)
	}
	if r := take(t, sp, k2, a2, 1); r.Banned() || r.Count != 20 {
		t.Fatalf("Take #20 with BanLimit -1 = %+v, want count 20, not banned", r)
	}
}

// Take counts n at once, and crossing BanLimit with n bans as one would.
func testCountN(t *testing.T, env *Env) {
	sp := env.space(t, "", limits(env.Unit))
	k, a := host("192.0.2.3")
	if r := take(t, sp, k, a, 3); r.Count != 3 || r.Banned() {
		t.Fatalf("Take(n=3) = %+v, want count 3", r)
	}
	if r := take(t, sp, k, a, 2); r.Count != 5 || r.Banned() {
		t.Fatalf("Take(n=2) = %+v, want count 5", r)
	}
	if r := take(t, sp, k, a, 4); !r.NewBan || r.Count != 9 || r.Ban.Offense != 1 {
		t.Fatalf("Take(n=4) = %+v, want a new ban at count 9", r)
	}
}

// Take with n = 0 reports the count and the bans, and writes nothing: not
// the count, not its expiry.
func testDecideWithoutCounting(t *testing.T, env *Env) {
	lim := limits(env.Unit)
	sp := env.space(t, "", lim)
	k, a := host("192.0.2.4")
	if r := take(t, sp, k, a, 0); r.Count != 0 || r.Banned() {
		t.Fatalf("Take(n=0) on a new key = %+v, want the zero Result", r)
	}
	if st, _ := sp.Inspect(t.Context(), k); st.Count != 0 || st.CountTTL != 0 {
		t.Fatalf("Inspect after Take(n=0) = %+v, want no counter", st)
	}
	for range 5 {
		take(t, sp, k, a, 1)
	}
	env.Wait(6 * env.Unit)
	for range 3 {
		if r := take(t, sp, k, a, 0); r.Count != 5 || r.Banned() {
			t.Fatalf("Take(n=0) = %+v, want count 5", r)
		}
	}
	env.Wait(5 * env.Unit) // 11 units after the last count: n = 0 kept nothing alive
	if r := take(t, sp, k, a, 1); r.Count != 1 {
		t.Fatalf("Take after TTL of counted silence = %+v, want count 1 (Take(n=0) must not reset the expiry)", r)
	}
	addBan(t, sp, store.Ban{Key: k, Source: store.SourceManual, Reason: "check"}, 30*env.Unit)
	if r := take(t, sp, k, a, 0); !r.Banned() || r.Ban.Reason != "check" {
		t.Fatalf("Take(n=0) on a banned key = %+v, want banned", r)
	}
}

// A counter lives while requests come within TTL of each other, and is
// forgotten after TTL of silence.
func testExpiry(t *testing.T, env *Env) {
	lim := limits(env.Unit)
	sp := env.space(t, "", lim)
	k, a := host("2001:db8::1")
	take(t, sp, k, a, 1)
	env.Wait(6 * env.Unit)
	if r := take(t, sp, k, a, 1); r.Count != 2 {
		t.Fatalf("Take within TTL = count %d, want 2", r.Count)
	}
	env.Wait(11 * env.Unit)
	if r := take(t, sp, k, a, 1); r.Count != 1 {
		t.Fatalf("Take after TTL = count %d, want 1", r.Count)
	}
	st, err := sp.Inspect(t.Context(), k)
	if err != nil || st.Key != k || st.Count != 1 || st.CountTTL <= 0 || st.CountTTL > lim.TTL || st.Ban != nil {
		t.Fatalf("Inspect = %+v, %v; want count 1, 0 < ttl <= %v, no ban", st, err, lim.TTL)
	}
}

// Each ban within the offense window is BanFactor times longer, up to
// MaxBanDuration, exactly as store.BanLength says. This is the test
// that keeps the escalation written in Go (store.BanLength) and in Lua
// (lua/take.lua) equal.
func testEscalation(t *testing.T, env *Env) {
	lim := limits(env.Unit)
	lim.BanDuration, lim.MaxBanDuration = 5*env.Unit, 12*env.Unit
	sp := env.space(t, "", lim)
	k, a := host("198.51.100.4")
	for offense := 1; offense <= 4; offense++ {
		var r store.Result
		for i := 0; i < 6 && !r.NewBan; i++ {
			r = take(t, sp, k, a, 1)
		}
		want := store.BanLength(&lim, offense)
		if !r.NewBan || r.BanLeft != want || r.Ban.Offense != offense {
			t.Fatalf("ban #%d = %+v, want a new ban of %v (BanLength), offense %d", offense, r, want, offense)
		}
		env.Wait(want + env.Unit) // the ban expires by itself
		if r := take(t, sp, k, a, 1); r.Banned() || r.Count != 1 {
			t.Fatalf("Take after ban #%d ended = %+v, want count 1, not banned", offense, r)
		}
	}
	if st, _ := sp.Inspect(t.Context(), k); st.Offenses != 4 {
		t.Fatalf("Inspect.Offenses = %d, want 4", st.Offenses)
	}
}

// Manual bans on a key, a range and a consumer refuse, list and lift.
func testManualBans(t *testing.T, env *Env) {
	ctx := t.Context()
	sp := env.space(t, "", limits(env.Unit))
	k, a := host("203.0.113.7")
	rng := store.Key{Prefix: netip.MustParsePrefix("198.51.100.0/24")}
	consumer := store.Key{Name: "cus_alpha"}
	b := addBan(t, sp, store.Ban{Key: k, Reason: "abuse | spam", Source: store.SourceManual, By: "ops@host"}, 0)
	if !b.Permanent() || b.Created.IsZero() || b.Reason != "abuse | spam" || b.By != "ops@host" {
		t.Fatalf("AddBan(permanent) = %+v", b)
	}
	b = addBan(t, sp, store.Ban{Key: rng, Range: true, Reason: "scanner", Source: store.SourceManual, By: "ops"}, 30*env.Unit)
	if !b.Range || !b.Expires.Equal(b.Created.Add(30*env.Unit)) {
		t.Fatalf("AddBan(range) = %+v, want a range ban ending 30 units after it was made", b)
	}
	addBan(t, sp, store.Ban{Key: consumer, Reason: "fraud", Source: store.SourceManual}, 30*env.Unit)

	if r := take(t, sp, k, a, 1); !r.Banned() || !r.Ban.Permanent() || r.BanLeft != 0 || r.Ban.Reason != "abuse | spam" || r.Ban.By != "ops@host" {
		t.Fatalf("Take(permanently banned) = %+v (ban %+v)", r, r.Ban)
	}
	inside, ia := host("198.51.100.77")
	if r := take(t, sp, inside, ia, 1); !r.Banned() || r.Ban.Key != rng || !r.Ban.Range || r.BanLeft <= 0 || r.BanLeft > 30*env.Unit {
		t.Fatalf("Take(inside the range) = %+v (ban %+v)", r, r.Ban)
	}
	if r := take(t, sp, inside, ia, 0); !r.Banned() || r.Ban.Key != rng {
		t.Fatalf("Take(inside the range, n=0) = %+v, want banned", r)
	}
	outside, oa := host("198.51.101.77")
	if r := take(t, sp, outside, oa, 1); r.Banned() {
		t.Fatalf("Take(outside the range) = %+v, want not banned", r)
	}
	if r := take(t, sp, consumer, netip.Addr{}, 1); !r.Banned() || r.Ban.Reason != "fraud" {
		t.Fatalf("Take(banned consumer) = %+v", r)
	}
	if got := keys(bans(t, sp, store.BanFilter{})); fmt.Sprint(got) != "[198.51.100.0/24 cus_alpha 203.0.113.7]" &&
		fmt.Sprint(got) != "[cus_alpha 198.51.100.0/24 203.0.113.7]" {
		t.Fatalf("Bans = %v, want the range and the consumer (30 units), then the permanent key ban", got)
	}
	if st, err := sp.Inspect(ctx, rng); err != nil || st.Ban == nil || !st.Ban.Range || st.Ban.Reason != "scanner" {
		t.Fatalf("Inspect(range) = %+v, %v; want its ban", st, err)
	}
	for _, lift := range []store.Key{k, rng, consumer} {
		b, ok, err := sp.Lift(ctx, lift)
		if err != nil || !ok || b.Key != lift {
			t.Fatalf("Lift(%s) = %+v, %v, %v; want the ban on it", lift, b, ok, err)
		}
	}
	if _, ok, err := sp.Lift(ctx, k); ok || err != nil {
		t.Fatalf("Lift(%s) again = %v, %v; want false, nil", k, ok, err)
	}
	for _, c := range []struct {
		k store.Key
		a netip.Addr
	}{{k, a}, {inside, ia}, {consumer, netip.Addr{}}} {
		if r := take(t, sp, c.k, c.a, 1); r.Banned() {
			t.Fatalf("Take(%s) after its lift = %+v, want not banned", c.k, r)
		}
	}
	if got := bans(t, sp, store.BanFilter{}); len(got) != 0 {
		t.Fatalf("Bans after lifting all = %v, want none", keys(got))
	}
}

// A key ban deletes the key's counter, so that a lifted key starts from
// nothing; a short manual ban expires by itself.
func testKeyBanResetsCounter(t *testing.T, env *Env) {
	ctx := t.Context()
	sp := env.space(t, "", limits(env.Unit))
	k, a := host("192.0.2.77")
	for range 4 {
		take(t, sp, k, a, 1)
	}
	addBan(t, sp, store.Ban{Key: k, Source: store.SourceManual}, 3*env.Unit)
	if _, ok, err := sp.Lift(ctx, k); !ok || err != nil {
		t.Fatalf("Lift(%s) = %v, %v", k, ok, err)
	}
	if r := take(t, sp, k, a, 1); r.Count != 1 {
		t.Fatalf("Take after ban and lift = count %d, want 1", r.Count)
	}
	addBan(t, sp, store.Ban{Key: k, Source: store.SourceManual}, 3*env.Unit)
	env.Wait(4 * env.Unit)
	if r := take(t, sp, k, a, 1); r.Banned() || r.Count != 1 {
		t.Fatalf("Take after a 3-unit ban ended = %+v, want count 1", r)
	}
}

// A range ban, like a key ban, deletes the counters of the keys inside
// it, so that a lifted range starts from nothing; keys outside it, and
// wider keys that merely overlap it, keep counting.
func testRangeBanResetsCounters(t *testing.T, env *Env) {
	ctx := t.Context()
	sp := env.space(t, "", limits(env.Unit))
	type target struct {
		k     store.Key
		a     netip.Addr
		reset bool
	}
	var targets []target
	for _, c := range []struct {
		key, addr string
		reset     bool
	}{
		{"198.51.100.7/32", "198.51.100.7", true},
		{"198.51.100.200/32", "198.51.100.200", true},
		{"198.51.101.7/32", "198.51.101.7", false},
		{"2001:db8:0:1::/64", "2001:db8:0:1::9", true},
		{"2001:db8:1:1::/64", "2001:db8:1:1::9", false},
		{"2001:db8::/32", "2001:db8::9", false}, // wider than the range: not inside it
	} {
		tg := target{store.Key{Prefix: netip.MustParsePrefix(c.key)}, netip.MustParseAddr(c.addr), c.reset}
		take(t, sp, tg.k, tg.a, 4)
		targets = append(targets, tg)
	}
	for _, r := range []string{"198.51.100.0/24", "2001:db8::/48"} {
		rng := store.Key{Prefix: netip.MustParsePrefix(r)}
		addBan(t, sp, store.Ban{Key: rng, Range: true, Source: store.SourceManual}, 30*env.Unit)
		if _, ok, err := sp.Lift(ctx, rng); !ok || err != nil {
			t.Fatalf("Lift(%s) = %v, %v", rng, ok, err)
		}
	}
	for _, tg := range targets {
		want := int64(5)
		if tg.reset {
			want = 1
		}
		if r := take(t, sp, tg.k, tg.a, 1); r.Banned() || r.Count != want {
			t.Errorf("Take(%s) after a range ban and its lift = %+v, want count %d", tg.k, r, want)
		}
	}
}

// BanFilter selects ranges alone, or bans inside a network.
func testFilters(t *testing.T, env *Env) {
	sp := env.space(t, "", limits(env.Unit))
	for _, target := range []string{"203.0.113.7/32", "203.0.113.99/32", "2001:db8:1:2::/64"} {
		addBan(t, sp, store.Ban{Key: store.Key{Prefix: netip.MustParsePrefix(target)}, Source: store.SourceManual}, time.Hour)
	}
	addBan(t, sp, store.Ban{Key: store.Key{Prefix: netip.MustParsePrefix("203.0.113.128/25")}, Range: true, Source: store.SourceManual}, 2*time.Hour)
	addBan(t, sp, store.Ban{Key: store.Key{Prefix: netip.MustParsePrefix("198.51.100.0/24")}, Range: true, Source: store.SourceManual}, 3*time.Hour)
	addBan(t, sp, store.Ban{Key: store.Key{Name: "cus_beta"}, Source: store.SourceManual}, 4*time.Hour)
	for _, c := range []struct {
		f    store.BanFilter
		want string
	}{
		{store.BanFilter{}, "[203.0.113.7 203.0.113.99 2001:db8:1:2::/64 203.0.113.128/25 198.51.100.0/24 cus_beta]"},
		{store.BanFilter{RangesOnly: true}, "[203.0.113.128/25 198.51.100.0/24]"},
		{store.BanFilter{Within: netip.MustParsePrefix("203.0.113.0/24")}, "[203.0.113.7 203.0.113.99 203.0.113.128/25]"},
		{store.BanFilter{Within: netip.MustParsePrefix("203.0.113.0/24"), RangesOnly: true}, "[203.0.113.128/25]"},
		{store.BanFilter{Within: netip.MustParsePrefix("2001:db8::/32")}, "[2001:db8:1:2::/64]"},
		{store.BanFilter{Within: netip.MustParsePrefix("203.0.113.128/26")}, "[]"},
	} {
		if got := fmt.Sprint(keys(bans(t, sp, c.f))); got != c.want {
			t.Errorf("Bans(%+v) = %s, want %s", c.f, got, c.want)
		}
	}
}

// Namespaces keep data apart; spaces of one namespace share it. A second
// space of a namespace with other limits is refused with ErrLimitsDiffer,
// and the error quotes both; the limits a space publishes are read back
// through the store.
func testNamespaces(t *testing.T, env *Env) {
	lim := limits(env.Unit)
	sp := env.space(t, "", lim)
	k, a := host("192.0.2.9")
	for range 3 {
		take(t, sp, k, a, 1)
	}
	other := env.space(t, "other:", lim)
	if r := take(t, other, k, a, 1); r.Count != 1 {
		t.Fatalf("Take in another namespace = count %d, want 1", r.Count)
	}
	addBan(t, sp, store.Ban{Key: k, Source: store.SourceManual}, 0)
	if got := bans(t, other, store.BanFilter{}); len(got) != 0 {
		t.Fatalf("Bans in another namespace = %v, want none", keys(got))
	}
	same := env.space(t, "", lim)
	if r := take(t, same, k, a, 1); !r.Banned() {
		t.Fatalf("Take through a second space of the namespace = %+v, want banned", r)
	}
	if got := keys(bans(t, same, store.BanFilter{})); fmt.Sprint(got) != "[192.0.2.9]" {
		t.Fatalf("Bans through a second space = %v, want [192.0.2.9]", got)
	}

	differs := lim
	differs.MaxRequests, differs.BanLimit = 250, 100
	_, err := env.Store.Space(store.Scope{Namespace: env.Namespace, Limits: differs})
	if !errors.Is(err, store.ErrLimitsDiffer) || !strings.Contains(err.Error(), "MaxRequests 0, BanLimit 5") ||
		!strings.Contains(err.Error(), "MaxRequests 250, BanLimit 100") || !strings.Contains(err.Error(), fmt.Sprintf("%q", env.Namespace)) {
		t.Fatalf("Space(same namespace, other limits) = %v; want ErrLimitsDiffer quoting the namespace and both limits", err)
	}

	ctx := t.Context()
	if got, ok, err := env.Store.Published(ctx, env.Namespace+"other:"); ok || err != nil {
		t.Fatalf("Published before any Publish = %+v, %v, %v; want none", got, ok, err)
	}
	published := lim
	published.MaxRequests, published.BanReason = 250, "too many | requests"
	pub := env.space(t, "published:", published)
	if err := pub.Publish(ctx); err != nil {
		t.Fatalf("Publish = %v", err)
	}
	if got, ok, err := env.Store.Published(ctx, env.Namespace+"published:"); !ok || err != nil || got != published {
		t.Fatalf("Published = %+v, %v, %v; want %+v", got, ok, err, published)
	}
	if _, ok, err := env.Store.Published(ctx, env.Namespace); ok || err != nil {
		t.Fatalf("Published(a namespace nobody published) = %v, %v; want none", ok, err)
	}
}

// 300 concurrent Takes on one key: every count from 1 to BanLimit+1 is
// handed out exactly once, one ban is written, the rest are refused by it.
func testConcurrentExactness(t *testing.T, env *Env) {
	lim := limits(env.Unit)
	lim.BanLimit = 250
	// Nothing may expire while 300 calls run, however slowly: this test
	// is about exactness, not expiry.
	lim.TTL, lim.BanDuration, lim.MaxBanDuration = 10_000*env.Unit, 10_000*env.Unit, 10_000*env.Unit
	sp := env.space(t, "", lim)
	k, a := host("192.0.2.200")
	var mu sync.Mutex
	seen := map[int64]int{}
	newBans, banned, errs := 0, 0, 0
	var wg sync.WaitGroup
	for range 300 {
		wg.Go(func() {
			r, err := sp.Take(t.Context(), k, a, 1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs++
			case r.NewBan:
				newBans++
				seen[r.Count]++
			case r.Banned():
				banned++
			default:
				seen[r.Count]++
			}
		})
	}
	wg.Wait()
	if errs != 0 || newBans != 1 || banned != 49 || len(seen) != 251 {
		t.Fatalf("300 concurrent Takes: %d errors, %d new bans, %d banned, %d distinct counts; want 0, 1, 49, 251", errs, newBans, banned, len(seen))
	}
	for n := int64(1); n <= 251; n++ {
		if seen[n] != 1 {
			t.Fatalf("count %d handed out %d times, want once", n, seen[n])
		}
	}
}

// Listing finds every ban. On a Redis Cluster 30 keys spread over every
// master, so this fails unless each master is read.
func testListsEveryBan(t *testing.T, env *Env) {
	sp := env.space(t, "", limits(env.Unit))
	want := map[store.Key]bool{}
	for i := range 30 {
		k, _ := host(fmt.Sprintf("192.0.2.%d", i+1))
		addBan(t, sp, store.Ban{Key: k, Source: store.SourceManual, Reason: "list"}, time.Hour)
		want[k] = true
	}
	got := bans(t, sp, store.BanFilter{})
	if len(got) != 30 {
		t.Fatalf("Bans = %d bans, want 30", len(got))
	}
	for _, b := range got {
		if !want[b.Key] || b.Reason != "list" {
			t.Fatalf("Bans lists %+v, want only the 30 bans written", b)
		}
		delete(want, b.Key)
	}
}
