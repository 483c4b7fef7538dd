// Package metrics exports the counters of protectors to Prometheus.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(metrics.NewCollector(api, login))
//	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// The collector reads Protector.Stats at scrape time: between scrapes it
// costs nothing, and a request pays only for the protector's own striped
// counters. It registers nothing itself, on the default registry or any
// other. Every series carries the protector's namespace as its only
// variable label beside a few fixed ones (status, source, policy): never
// an address, a key or a consumer, so the number of series does not grow
// with traffic.
package metrics

import (
	"cmp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/httpprotect/protect"
)

// NewCollector returns a collector for the protectors ps, to register on
// a registry of yours. Protectors that share a namespace are summed into
// one set of series (two instances of one route, say); nil protectors,
// and a protector given twice, count once or not at all. With no
// protector it collects nothing.
func NewCollector(ps ...*protect.Protector) prometheus.Collector {
	c := &collector{d: newDescs()}
	for _, p := range ps {
		if p != nil && !slices.Contains(c.ps, p) {
			c.ps = append(c.ps, p)
		}
	}
	return c
}

type collector struct {
	ps []*protect.Protector
	d  descs
}

// descs describes every series; each collector makes its own, so that
// the package holds no state.
type descs struct {
	decisions, dryRun, penalties, bans, lifted, rangeBans                *prometheus.Desc
	storeCalls, storeErrors, storeTimeouts, storeCanceled, storeDuration *prometheus.Desc
	storeFailures, circuitOpen, circuitOpens, circuitRejected            *prometheus.Desc
	storeMalformed                                                       *prometheus.Desc
	listEntries, listErrors, listAge, listUp                             *prometheus.Desc
}

// unknownPlan is the status of protect_decisions_total for a consumer
// named with a plan the service does not know (protect.ErrNoPlan),
// counted apart from status unknown.
const unknownPlan = "unknown_plan"

func newDescs() descs {
	ns := []string{"namespace"}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append(ns, labels...), nil)
	}
	return descs{
		decisions: desc("protect_decisions_total",
			"Requests decided, by status: allowed, safe, limited, banned, unknown, unavailable, exhausted, blocked, challenged, unknown_plan.", "status"),
		dryRun: desc("protect_dry_run_refusals_total",
			"Decisions that would have refused and that DryRun let through."),
		penalties: desc("protect_penalties_total",
			"Failures reported by Penalize and by Middleware under CountStatus."),
		bans: desc("protect_bans_total",
			"Bans written by this process: source auto (a client passed BanLimit) or manual (Protector.Ban).", "source"),
		lifted: desc("protect_bans_lifted_total",
			"Bans lifted by this process (not those that expired)."),
		rangeBans: desc("protect_range_bans",
			"Range bans in force in the protector's ban list, as this process last read it; protectors sharing a list report it each."),
		storeCalls: desc("protect_store_calls_total",
			"Calls made to a store outside this process (Redis), answered or not."),
		storeErrors: desc("protect_store_errors_total",
			"Store calls that failed, timeouts included."),
		storeTimeouts: desc("protect_store_timeouts_total",
			"Store calls that ran out of StoreTimeout."),
		storeCanceled: desc("protect_store_canceled_total",
			"Store calls whose caller gave up before the store answered."),
		storeDuration: desc("protect_store_duration_seconds",
			"Time a store call took, answered or not."),
		storeFailures: desc("protect_store_failures_total",
			"Requests decided by the failure policy (open, closed, local) because the store failed or the circuit was open.", "policy"),
		storeMalformed: desc("protect_store_malformed_total",
			"Requests that met a record the store holds but cannot read, each decided as if the record were absent (not a store failure)."),
		circuitOpen: desc("protect_circuit_open",
			"1 while the circuit breaker keeps requests from the failing store, else 0."),
		circuitOpens: desc("protect_circuit_opens_total",
			"Times the circuit breaker opened."),
		circuitRejected: desc("protect_circuit_rejected_total",
			"Store calls the open circuit answered without calling the store."),
		listEntries: desc("protect_blocklist_entries",
			"Entries in the set in force of each block list.", "list"),
		listErrors: desc("protect_blocklist_errors_total",
			"Failed checks of each block list's source (a refused load, a failed fetch, a LAPI down); the last good set stays in force.", "list"),
		listAge: desc("protect_blocklist_age_seconds",
			"Seconds since each block list's source last confirmed the set in force; absent before it ever did. It grows while the list is stale.", "list"),
		listUp: desc("protect_blocklist_up",
			"1 when the last check of each block list's source succeeded, else 0.", "list"),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	d := &c.d
	for _, d := range []*prometheus.Desc{
		d.decisions, d.dryRun, d.penalties, d.bans, d.lifted, d.rangeBans,
		d.storeCalls, d.storeErrors, d.storeTimeouts, d.storeCanceled, d.storeDuration,
		d.storeFailures, d.circuitOpen, d.circuitOpens, d.circuitRejected,
		d.storeMalformed,
		d.listEntries, d.listErrors, d.listAge, d.listUp,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one read of Stats per
// protector, then the series of each namespace.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.byNamespace() {
		c.d.collect(ch, s)
	}
}

// nsStats is the sum of the Stats of the protectors of one namespace.
type nsStats struct {
	protect.Stats
	failures map[protect.FailurePolicy]uint64 // StoreFailures by policy
}

// byNamespace reads every protector and sums those of one namespace, in
// namespace order.
func (c *collector) byNamespace() []*nsStats {
	var out []*nsStats
	for _, p := range c.ps {
		s := p.Stats()
		i, found := slices.BinarySearchFunc(out, s.Namespace, func(n *nsStats, ns string) int { return cmp.Compare(n.Namespace, ns) })
		if !found {
			out = slices.Insert(out, i, &nsStats{Stats: protect.Stats{Namespace: s.Namespace, RangeBans: -1}, failures: map[protect.FailurePolicy]uint64{}})
		}
		out[i].add(&s)
	}
	return out
}

// add sums s into n. The circuit is open if any protector's is; range
// bans are one ban list's, read by each: the largest count is the newest.
func (n *nsStats) add(s *protect.Stats) {
	t := &n.Stats
	for i := range t.Decisions {
		t.Decisions[i] += s.Decisions[i]
	}
	t.UnknownPlans += s.UnknownPlans
	t.DryRunRefusals += s.DryRunRefusals
	t.Penalties += s.Penalties
	t.AutoBans += s.AutoBans
	t.ManualBans += s.ManualBans
	t.BansLifted += s.BansLifted
	t.StoreCalls += s.StoreCalls
	t.StoreErrors += s.StoreErrors
	t.StoreTimeouts += s.StoreTimeouts
	t.StoreCanceled += s.StoreCanceled
	t.StoreLatency.Bounds = s.StoreLatency.Bounds
	for i := range t.StoreLatency.Counts {
		t.StoreLatency.Counts[i] += s.StoreLatency.Counts[i]
	}
	t.StoreLatency.Sum += s.StoreLatency.Sum
	t.CircuitOpen = t.CircuitOpen || s.CircuitOpen
	t.CircuitOpens += s.CircuitOpens
	t.CircuitRejected += s.CircuitRejected
	n.failures[s.OnStoreError] += s.StoreFailures
	t.Malformed += s.Malformed
	t.RangeBans = max(t.RangeBans, s.RangeBans)
	// Protectors of one namespace that name a list alike read one source
	// each (or share a live one): report the list once, as its most
	// complete reader sees it.
	for _, l := range s.BlockLists {
		i := slices.IndexFunc(t.BlockLists, func(m protect.BlockListStats) bool { return m.Name == l.Name })
		if i < 0 {
			t.BlockLists = append(t.BlockLists, l)
			continue
		}
		m := &t.BlockLists[i]
		m.Entries, m.Errors, m.Up = max(m.Entries, l.Entries), max(m.Errors, l.Errors), m.Up && l.Up
		if m.Age < 0 || l.Age >= 0 && l.Age < m.Age {
			m.Age = l.Age
		}
	}
}

func (d *descs) collect(ch chan<- prometheus.Metric, s *nsStats) {
	ns := s.Namespace
	send := func(desc *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		m, err := prometheus.NewConstMetric(desc, t, v, append([]string{ns}, labels...)...)
		if err != nil {
			m = prometheus.NewInvalidMetric(desc, err) // the registry reports it
		}
		ch <- m
	}
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		send(desc, prometheus.CounterValue, float64(v), labels...)
	}
	for st, n := range s.Decisions {
		if protect.Status(st) == protect.Unknown {
			// A consumer under a plan nobody configured is the operator's
			// mistake, not a client's: a status of its own.
			n -= min(n, s.UnknownPlans)
		}
		counter(d.decisions, n, protect.Status(st).String())
	}
	counter(d.decisions, s.UnknownPlans, unknownPlan)
	counter(d.dryRun, s.DryRunRefusals)
	counter(d.penalties, s.Penalties)
	counter(d.bans, s.AutoBans, "auto")
	counter(d.bans, s.ManualBans, "manual")
	counter(d.lifted, s.BansLifted)
	if s.RangeBans >= 0 {
		send(d.rangeBans, prometheus.GaugeValue, float64(s.RangeBans))
	}

	counter(d.storeCalls, s.StoreCalls)
	counter(d.storeErrors, s.StoreErrors)
	counter(d.storeTimeouts, s.StoreTimeouts)
	counter(d.storeCanceled, s.StoreCanceled)
	h := &s.StoreLatency
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		buckets[b.Seconds()] = cum
	}
	m, err := prometheus.NewConstHistogram(d.storeDuration, h.Count(), h.Sum.Seconds(), buckets, ns)
	if err != nil {
		m = prometheus.NewInvalidMetric(d.storeDuration, err)
	}
	ch <- m
	policies := make([]protect.FailurePolicy, 0, len(s.failures))
	for p := range s.failures {
		policies = append(policies, p)
	}
	slices.Sort(policies)
	for _, p := range policies {
		counter(d.storeFailures, s.failures[p], p.String())
	}

	open := 0.0
	if s.CircuitOpen {
		open = 1
	}
	send(d.circuitOpen, prometheus.GaugeValue, open)
	counter(d.circuitOpens, s.CircuitOpens)
	counter(d.circuitRejected, s.CircuitRejected)
	counter(d.storeMalformed, s.Malformed)

	for _, l := range s.BlockLists {
		send(d.listEntries, prometheus.GaugeValue, float64(l.Entries), l.Name)
		counter(d.listErrors, l.Errors, l.Name)
		if l.Age >= 0 {
			send(d.listAge, prometheus.GaugeValue, l.Age.Seconds(), l.Name)
		}
		up := 0.0
		if l.Up {
			up = 1
		}
		send(d.listUp, prometheus.GaugeValue, up, l.Name)
	}
}
