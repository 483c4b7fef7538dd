package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/testclock"
	"github.com/httpprotect/protect/metrics"
	"github.com/httpprotect/protect/redisstore"
)

type fakeClock = testclock.Clock

var newFakeClock = testclock.New

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newProtector(t *testing.T, cfg protect.Config) *protect.Protector {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	p, err := protect.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// compare checks the named series of c against want, in the text format
// without HELP lines: the help texts are taken from c.
func compare(t *testing.T, c prometheus.Collector, want string, names ...string) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	help := map[string]string{}
	for _, mf := range mfs {
		help[mf.GetName()] = mf.GetHelp()
	}
	var b strings.Builder
	for line := range strings.Lines(want) {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ = strings.Cut(name, " ")
			fmt.Fprintf(&b, "# HELP %s %s\n", name, help[name])
		}
		b.WriteString(line)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(b.String()), names...); err != nil {
		t.Error(err)
	}
}

// series builds the expected text of one counter or gauge family.
func series(name, typ string, lines ...string) string {
	return "# TYPE " + name + " " + typ + "\n" + strings.Join(lines, "\n") + "\n"
}

// A scripted run on the memory store: every step decides what the
// collector then reports, exactly.
func TestScriptedRun(t *testing.T) {
	clk := newFakeClock()
	p := newProtector(t, protect.Config{Namespace: "api:", MaxRequests: 2, BanLimit: 4,
		SafeNetworks: []string{"10.0.0.0/8"}, Clock: clk.Now})
	ctx := t.Context()
	client := netip.MustParseAddr("192.0.2.7")
	want := map[protect.Status]int{}
	verify := func(a netip.Addr, st protect.Status) {
		t.Helper()
		d, err := p.VerifyAddr(ctx, a)
		if err != nil || d.Status != st {
			t.Fatalf("VerifyAddr(%v) = %v, %v; want %v", a, d.Status, err, st)
		}
		want[st]++
	}
	verify(client, protect.Allowed)
	verify(client, protect.Allowed)
	verify(client, protect.Limited)
	verify(client, protect.Limited)
	verify(client, protect.Banned) // count 5 passes BanLimit 4: an automatic ban
	verify(client, protect.Banned)
	verify(netip.MustParseAddr("10.1.2.3"), protect.Safe)
	verify(netip.Addr{}, protect.Unknown)
	if _, err := p.Lift(ctx, "192.0.2.7", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ban(ctx, "198.51.100.0/24", protect.BanOptions{Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ban(ctx, "203.0.113.9", protect.BanOptions{Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	verify(netip.MustParseAddr("198.51.100.20"), protect.Banned)
	// Penalize decides no request: it counts a failure (two, here).
	r := httptest.NewRequest("POST", "/login", nil)
	r.RemoteAddr = "192.0.2.99:1234"
	if d, err := p.Penalize(ctx, r, 2); err != nil || d.Status != protect.Allowed {
		t.Fatalf("Penalize(192.0.2.99, 2) = %v, %v; want allowed", d.Status, err)
	}
	plan, err := protect.NewPlan("month", protect.Quota{Name: "monthly", Limit: 1, Period: protect.Monthly})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []protect.Status{protect.Allowed, protect.Exhausted} {
		if d, _ := p.VerifyConsumer(ctx, "acme", plan); d.Status != st {
			t.Fatalf("VerifyConsumer(acme) = %v, want %v", d.Status, st)
		}
		want[st]++
	}
	// A consumer named with no plan (a plan name the service does not
	// know) is the operator's mistake: status unknown_plan, apart from
	// the clients that could not be told (unknown), which stay at one.
	for range 3 {
		if d, _ := p.VerifyConsumer(ctx, "acme", nil); d.Status != protect.Unknown || !errors.Is(d.Err, protect.ErrNoPlan) {
			t.Fatalf("VerifyConsumer(acme, no plan) = %v, %v; want unknown, ErrNoPlan", d.Status, d.Err)
		}
		want[unknownPlan]++
	}
	if _, err := p.VerifyConsumer(ctx, "", plan); err != nil { // no consumer: a client not told, status unknown
		t.Fatal(err)
	}
	want[protect.Unknown]++
	if s := p.Stats(); s.Decisions[protect.Unknown] != 5 || s.UnknownPlans != 3 {
		t.Fatalf("Stats() = Decisions[Unknown] %d, UnknownPlans %d; want 5, 3", s.Decisions[protect.Unknown], s.UnknownPlans)
	}

	c := metrics.NewCollector(p)
	compare(t, c, series("protect_decisions_total", "counter", decisions("api:", want)...)+
		series("protect_bans_total", "counter",
			`protect_bans_total{namespace="api:",source="auto"} 1`,
			`protect_bans_total{namespace="api:",source="manual"} 2`)+
		series("protect_bans_lifted_total", "counter", `protect_bans_lifted_total{namespace="api:"} 1`)+
		series("protect_range_bans", "gauge", `protect_range_bans{namespace="api:"} 1`)+
		series("protect_penalties_total", "counter", `protect_penalties_total{namespace="api:"} 2`)+
		series("protect_dry_run_refusals_total", "counter", `protect_dry_run_refusals_total{namespace="api:"} 0`)+
		// The memory store is in this process: never called through the
		// network, timed or broken.
		series("protect_store_calls_total", "counter", `protect_store_calls_total{namespace="api:"} 0`)+
		series("protect_store_failures_total", "counter", `protect_store_failures_total{namespace="api:",policy="local"} 0`)+
		series("protect_circuit_open", "gauge", `protect_circuit_open{namespace="api:"} 0`),
		"protect_decisions_total", "protect_bans_total", "protect_bans_lifted_total", "protect_range_bans",
		"protect_penalties_total", "protect_dry_run_refusals_total", "protect_store_calls_total",
		"protect_store_failures_total", "protect_circuit_open")

	// The range ban ends by the store's clock, and the gauge with it.
	clk.Advance(2 * time.Hour)
	compare(t, c, series("protect_range_bans", "gauge", `protect_range_bans{namespace="api:"} 0`), "protect_range_bans")
}

// A dry run decides and counts every status, and counts apart the
// refusals it let through.
func TestDryRun(t *testing.T) {
	p := newProtector(t, protect.Config{Namespace: "dry:", MaxRequests: 1, BanLimit: -1, DryRun: true})
	for range 3 {
		p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1"))
	}
	p.VerifyAddr(t.Context(), netip.Addr{})
	compare(t, metrics.NewCollector(p),
		series("protect_dry_run_refusals_total", "counter", `protect_dry_run_refusals_total{namespace="dry:"} 3`),
		"protect_dry_run_refusals_total")
	if s := p.Stats(); s.Decisions[protect.Allowed] != 1 || s.Decisions[protect.Limited] != 2 || s.Decisions[protect.Unknown] != 1 {
		t.Fatalf("Stats().Decisions = %v, want 1 allowed, 2 limited, 1 unknown", s.Decisions)
	}
}

// A store outage under each failure policy: what the store answered,
// what failed, what the breaker kept from the store and what the policy
// decided are each reported exactly, and the circuit's state with them.
func TestOutage(t *testing.T) {
	for _, tc := range []struct {
		policy protect.FailurePolicy
		during []protect.Status
	}{
		{protect.FailOpen, []protect.Status{protect.Allowed, protect.Allowed, protect.Allowed, protect.Allowed, protect.Allowed}},
		{protect.FailClosed, []protect.Status{protect.Unavailable, protect.Unavailable, protect.Unavailable, protect.Unavailable, protect.Unavailable}},
		// The local store starts from nothing: 2 served, then limited.
		{protect.FailLocal, []protect.Status{protect.Allowed, protect.Allowed, protect.Limited, protect.Limited, protect.Limited}},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			m := miniredis.RunT(t)
			clk := newFakeClock()
			rc := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
			store := redisstore.New(rc, redisstore.Options{Clock: clk.Now, Logger: quiet(), RangeRefresh: -1})
			t.Cleanup(func() { store.Close(); rc.Close() })
			// A StoreTimeout a loaded machine never reaches: the outage is
			// the errors the test sets, not a slow answer.
			p := newProtector(t, protect.Config{Store: store, Namespace: "out:", MaxRequests: 2, OnStoreError: tc.policy, Clock: clk.Now,
				StoreTimeout: 5 * time.Second})
			c := metrics.NewCollector(p)
			ctx := t.Context()
			client := netip.MustParseAddr("192.0.2.44")
			want := map[protect.Status]int{}
			verify := func(st protect.Status) {
				t.Helper()
				d, err := p.VerifyAddr(ctx, client)
				if err != nil || d.Status != st {
					t.Fatalf("VerifyAddr(%v) = %v, %v (Err %v); want %v", client, d.Status, err, d.Err, st)
				}
				want[st]++
			}
			verify(protect.Allowed)
			m.SetError("LOADING Redis is loading the dataset in memory")
			for _, st := range tc.during {
				verify(st)
			}
			// Three failures opened the circuit; it kept the last two
			// requests from the store.
			failing := series("protect_store_calls_total", "counter", `protect_store_calls_total{namespace="out:"} 4`) +
				series("protect_store_errors_total", "counter", `protect_store_errors_total{namespace="out:"} 3`) +
				series("protect_store_timeouts_total", "counter", `protect_store_timeouts_total{namespace="out:"} 0`) +
				series("protect_circuit_open", "gauge", `protect_circuit_open{namespace="out:"} 1`) +
				series("protect_circuit_opens_total", "counter", `protect_circuit_opens_total{namespace="out:"} 1`) +
				series("protect_circuit_rejected_total", "counter", `protect_circuit_rejected_total{namespace="out:"} 2`) +
				series("protect_store_failures_total", "counter", fmt.Sprintf(`protect_store_failures_total{namespace="out:",policy=%q} 5`, tc.policy))
			names := []string{"protect_store_calls_total", "protect_store_errors_total", "protect_store_timeouts_total",
				"protect_circuit_open", "protect_circuit_opens_total", "protect_circuit_rejected_total", "protect_store_failures_total"}
			compare(t, c, failing, names...)

			// The store is back; after the cooldown one probe closes the
			// circuit.
			m.SetError("")
			clk.Advance(time.Second)
			verify(protect.Allowed) // Redis counted 1 before the outage: this is 2
			compare(t, c, series("protect_decisions_total", "counter", decisions("out:", want)...)+
				series("protect_store_calls_total", "counter", `protect_store_calls_total{namespace="out:"} 5`)+
				series("protect_circuit_open", "gauge", `protect_circuit_open{namespace="out:"} 0`),
				"protect_decisions_total", "protect_store_calls_total", "protect_circuit_open")
			if n := histogramCount(t, c, "protect_store_duration_seconds"); n != 5 {
				t.Errorf("histogramCount(protect_store_duration_seconds) = %d, want 5", n)
			}
		})
	}
}

// A store that accepts and never answers: the call runs out of
// StoreTimeout, and is counted as an error and a timeout.
func TestStoreTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rc := redis.NewClient(&redis.Options{Addr: l.Addr().String(), MaxRetries: -1, ContextTimeoutEnabled: true})
	store := redisstore.New(rc, redisstore.Options{Logger: quiet(), RangeRefresh: -1})
	t.Cleanup(func() { store.Close(); rc.Close() })
	p := newProtector(t, protect.Config{Store: store, Namespace: "slow:", OnStoreError: protect.FailOpen, StoreTimeout: 20 * time.Millisecond})
	if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1")); d.Status != protect.Allowed || d.Err == nil {
		t.Fatalf("VerifyAddr(192.0.2.1) = %v, Err %v; want allowed with an error (FailOpen)", d.Status, d.Err)
	}
	compare(t, metrics.NewCollector(p),
		series("protect_store_errors_total", "counter", `protect_store_errors_total{namespace="slow:"} 1`)+
			series("protect_store_timeouts_total", "counter", `protect_store_timeouts_total{namespace="slow:"} 1`),
		"protect_store_errors_total", "protect_store_timeouts_total")
	// The call waited its StoreTimeout: it is in a bucket above 20ms.
	s := p.Stats()
	if s.StoreLatency.Count() != 1 || s.StoreLatency.Sum < 20*time.Millisecond {
		t.Fatalf("Stats().StoreLatency = %+v, want one call of at least 20ms", s.StoreLatency)
	}
}

// decisions returns the protect_decisions_total lines of namespace ns
// for the counts n, in the order the text format sorts them.
func decisions(ns string, n map[protect.Status]int) []string {
	var out []string
	for _, st := range []protect.Status{protect.Allowed, protect.Banned, protect.Blocked, protect.Challenged, protect.Exhausted, protect.Limited, protect.Safe, protect.Unavailable, protect.Unknown} {
		out = append(out, fmt.Sprintf(`protect_decisions_total{namespace=%q,status=%q} %d`, ns, st, n[st]))
	}
	return append(out, fmt.Sprintf(`protect_decisions_total{namespace=%q,status="unknown_plan"} %d`, ns, n[unknownPlan]))
}

// unknownPlan stands for status unknown_plan in the maps of decisions:
// an Unknown decision of a consumer with no plan (protect.ErrNoPlan).
const unknownPlan = protect.Status(255)

func histogramCount(t *testing.T, c prometheus.Collector, name string) uint64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("Gather() holds no %s, want it", name)
	return 0
}

// A pedantic registry accepts the collector, with protectors that share
// a namespace (summed) and others that do not, and the linter finds
// nothing to say of the names.
func TestPedantic(t *testing.T) {
	a1 := newProtector(t, protect.Config{Namespace: "a:", MaxRequests: 1})
	a2 := newProtector(t, protect.Config{Namespace: "a:", MaxRequests: 1, OnStoreError: protect.FailOpen})
	b := newProtector(t, protect.Config{Namespace: "b:"})
	for _, p := range []*protect.Protector{a1, a2, a2, b} {
		p.VerifyAddr(context.Background(), netip.MustParseAddr("192.0.2.1"))
		p.VerifyAddr(context.Background(), netip.MustParseAddr("192.0.2.1"))
	}
	c := metrics.NewCollector(a1, a2, b, a2, nil)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil || len(problems) != 0 {
		t.Fatalf("CollectAndLint() = %v, %v; want no problems", problems, err)
	}
	// a1 decided twice, a2 (given twice) four times: a: holds six, of
	// which four limited; b: two, both allowed.
	lines := append(decisions("a:", map[protect.Status]int{protect.Allowed: 2, protect.Limited: 4}),
		decisions("b:", map[protect.Status]int{protect.Allowed: 2})...)
	compare(t, c, series("protect_decisions_total", "counter", lines...)+
		series("protect_store_failures_total", "counter",
			`protect_store_failures_total{namespace="a:",policy="local"} 0`,
			`protect_store_failures_total{namespace="a:",policy="open"} 0`,
			`protect_store_failures_total{namespace="b:",policy="local"} 0`),
		"protect_decisions_total", "protect_store_failures_total")
}

// Making, registering elsewhere and collecting a collector leaves the
// default registry as it was.
func TestDefaultRegistryUntouched(t *testing.T) {
	names := func() []string {
		mfs, err := prometheus.DefaultGatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, mf := range mfs {
			out = append(out, mf.GetName())
		}
		return out
	}
	before := names()
	p := newProtector(t, protect.Config{})
	p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1"))
	c := metrics.NewCollector(p)
	prometheus.NewRegistry().MustRegister(c)
	testutil.CollectAndCount(c)
	after := names()
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("DefaultGatherer.Gather() names after NewCollector =\n%v\nwant, as before it,\n%v", after, before)
	}
	for _, n := range after {
		if strings.HasPrefix(n, "protect_") {
			t.Fatalf("DefaultGatherer.Gather() holds %s, want no protect_ metric", n)
		}
	}
	if prometheus.DefaultRegisterer.Unregister(c) {
		t.Fatal("DefaultRegisterer.Unregister(c) = true, want false: the collector is not on the default registry")
	}
}
