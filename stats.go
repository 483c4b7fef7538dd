package protect

import (
	"context"
	"encoding/binary"
	"errors"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/httpprotect/protect/store"
)

// numStatuses is the number of Status values; Stats.Decisions has one
// counter each.
const numStatuses = int(Challenged) + 1

// numLatencyBuckets is the number of bounded buckets of the store latency
// histogram (Stats.StoreLatency).
const numLatencyBuckets = 12

// latencyBounds are the upper bounds of the store latency buckets, fixed
// so that the histograms of protectors and instances add up: from 100µs
// (a Redis round trip on a quiet network) to 1s (ten times the default
// StoreTimeout; a call that waited out its StoreTimeout lands in the
// bucket above it).
var latencyBounds = [numLatencyBuckets]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, time.Second,
}

// Stats is a snapshot of a protector's counters, from New to the call of
// Protector.Stats. Every counter only goes up; CircuitOpen and RangeBans
// are the state at the call. The zero Stats is a protector that has
// decided nothing.
//
// A request is counted once, in Decisions, by the call that decided it:
// Verify, VerifyAddr, VerifyKey, VerifyConsumer, VerifyConsumerN, Check,
// or Middleware (once per request, whatever Config.CountStatus says).
// Penalize decides no request: it adds to Penalties, and to AutoBans when
// it bans.
type Stats struct {
	// Namespace is the protector's Config.Namespace.
	Namespace string
	// OnStoreError is the protector's Config.OnStoreError.
	OnStoreError FailurePolicy

	// Decisions counts the requests decided, by Status; a dry run counts
	// the status it decided, refusal or not.
	Decisions [numStatuses]uint64
	// UnknownPlans counts the Unknown decisions of a consumer with no
	// plan (ErrNoPlan); DryRunRefusals the refusals DryRun let through.
	UnknownPlans, DryRunRefusals uint64
	// Penalties counts the failures reported by Penalize (its n) and by
	// Middleware under Config.CountStatus, whatever their outcome.
	Penalties uint64

	// AutoBans counts the bans this protector wrote because a client
	// passed BanLimit (under FailLocal too), and by prefix escalation.
	AutoBans uint64
	// ManualBans counts the bans added through Protector.Ban, in this
	// process; BansLifted those removed through Lift (admin's lifts too),
	// not those that expired.
	ManualBans, BansLifted uint64

	// StoreCalls counts the calls made to a store outside this process
	// (Redis), answered or not; a memory store's are not counted.
	StoreCalls uint64
	// StoreErrors counts the StoreCalls that failed, StoreTimeouts those
	// of them that ran out of StoreTimeout, and StoreCanceled the calls
	// whose caller's context ended first (not StoreErrors: they say
	// nothing about the store).
	StoreErrors, StoreTimeouts, StoreCanceled uint64
	// StoreLatency is the time the StoreCalls took.
	StoreLatency LatencyHistogram

	// CircuitOpen reports whether the circuit breaker in front of the
	// store is open: calls are answered by the failure policy.
	CircuitOpen bool
	// CircuitOpens counts the times the circuit opened, and
	// CircuitRejected the calls it answered without calling the store.
	CircuitOpens, CircuitRejected uint64
	// StoreFailures counts the requests that the failure policy
	// (OnStoreError) decided because the store failed or the circuit was
	// open.
	StoreFailures uint64
	// Malformed counts the requests that met a record the store holds
	// but cannot read (ErrMalformed), decided as if it were absent; they
	// are not StoreErrors and never open the circuit.
	Malformed uint64

	// PendingBans is the number of bans FailLocal wrote while the store
	// was down and not yet written to it (see OnStoreError).
	PendingBans int

	// RangeBans is the number of range bans in force in the protector's
	// ban list, read from the copy every request checks (on Redis up to a
	// refresh interval old); -1 when the store keeps no such copy. Key
	// bans are not counted: on Redis that would be a scan per scrape.
	RangeBans int

	// BlockLists is the state of each of Config.BlockLists at the call,
	// in Config order; nil when there are none.
	BlockLists []BlockListStats
}

// A LatencyHistogram counts durations in the fixed buckets bounded by
// Bounds. The zero value is empty.
type LatencyHistogram struct {
	// Bounds are the buckets' upper bounds, in increasing order.
	Bounds [numLatencyBuckets]time.Duration
	// Counts[i] counts the durations d with Bounds[i-1] < d <= Bounds[i];
	// the last counts those above every bound. They are not cumulative.
	Counts [numLatencyBuckets + 1]uint64
	// Sum is the total of every duration counted.
	Sum time.Duration
}

// Count is the number of durations counted.
func (h *LatencyHistogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Stats returns a snapshot of the protector's counters. It is cheap (no
// store call, no lock a request takes) and safe to call at any time, by
// a Prometheus scrape say (package metrics).
func (p *Protector) Stats() Stats {
	s := p.stats.snapshot()
	s.Namespace, s.OnStoreError = p.cfg.Namespace, p.cfg.OnStoreError
	s.RangeBans = -1
	if g := p.guard; g != nil {
		s.CircuitOpen, s.PendingBans = g.brk.Open(), int(g.pending.n.Load())
	}
	if r, ok := p.raw.(store.RangeBanCounter); ok {
		s.RangeBans = r.RangeBans()
	}
	s.BlockLists = p.lists.Stats()
	return s
}

// stats holds a protector's counters, striped: every request adds to one
// counter, and a counter that every core wrote would bounce its cache line
// between the cores on every request. Each goroutine writes to one stripe
// of its own, mostly, and Stats sums them.
type stats struct {
	stripes []statStripe
	mask    uintptr
}

// statStripe is one stripe of counters, followed by 128 bytes (two cache
// lines, as the adjacent-line prefetcher of x86 pairs them) so that the
// counters of two stripes never share a line.
type statStripe struct {
	statCounters
	_ [128]byte
}

type statCounters struct {
	decisions     [numStatuses]atomic.Uint64
	unknownPlans  atomic.Uint64
	dryRun        atomic.Uint64
	penalties     atomic.Uint64
	autoBans      atomic.Uint64
	manualBans    atomic.Uint64
	lifted        atomic.Uint64
	storeCalls    atomic.Uint64
	storeErrors   atomic.Uint64
	storeTimeouts atomic.Uint64
	storeCanceled atomic.Uint64
	latency       [numLatencyBuckets + 1]atomic.Uint64
	latencySum    atomic.Int64
	circuitOpens  atomic.Uint64
	circuitReject atomic.Uint64
	storeFailures atomic.Uint64
	malformed     atomic.Uint64
}

func newStats() stats {
	// Four stripes a core: goroutines pick theirs by a hash (below), and
	// fewer would put two busy goroutines on one stripe too often.
	n := 1 << bits.Len(uint(4*runtime.GOMAXPROCS(0)-1))
	n = min(n, 256)
	return stats{stripes: make([]statStripe, n), mask: uintptr(n - 1)}
}

// stripe returns the stripe for a count that hint picks. Requests pick
// theirs by something of their own that varies from one to the next (a
// decision's count and address, a store call's latency), which spreads
// the writes of concurrent requests over the stripes at no cost: a
// request's goroutine and core are not known without the runtime's
// internals.
func (s *stats) stripe(hint uint64) *statStripe {
	return &s.stripes[uintptr((hint*0x9E3779B97F4A7C15)>>56)&s.mask]
}

// hint picks d's stripe: its count, which moves with every request of a
// key; what a plan's limit has left, which moves with every request of a
// consumer; and its wait, which moves with the clock for the refusals
// that count nothing (a ban's time left). Safe and unknown clients share
// a stripe: they count nothing else.
func (d *Decision) hint() uint64 {
	return uint64(d.Count) ^ uint64(d.Remaining)<<20 ^ uint64(d.RetryAfter)
}

// decided counts the decision d; deferred by every call that decides a
// request.
func (p *Protector) decided(d *Decision) {
	// stripe(d.hint()), written out: every decision takes this step.
	h := uint64(d.Count) ^ uint64(d.Remaining)<<20 ^ uint64(d.RetryAfter)
	st := &p.stats.stripes[uintptr((h*0x9E3779B97F4A7C15)>>56)&p.stats.mask]
	st.decisions[d.Status%Status(numStatuses)].Add(1)
	if d.Status == Unknown && d.Err != nil && errors.Is(d.Err, ErrNoPlan) {
		st.unknownPlans.Add(1)
	}
	if d.DryRun && d.Status >= Limited {
		st.dryRun.Add(1)
	}
}

// storeCall counts a call of a store outside the process that took
// took and ended in err, whose caller's context is ctx.
func (s *stats) storeCall(ctx context.Context, took time.Duration, err error) {
	st := s.stripe(uint64(took))
	st.storeCalls.Add(1)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		st.storeCanceled.Add(1)
	default:
		st.storeErrors.Add(1)
		// StoreTimeout ends a call as context.DeadlineExceeded, or as the
		// socket's i/o timeout when the client set the deadline on the
		// connection (go-redis with ContextTimeoutEnabled): both say
		// Timeout.
		var t interface{ Timeout() bool }
		if errors.As(err, &t) && t.Timeout() {
			st.storeTimeouts.Add(1)
		}
	}
	i := 0
	for i < numLatencyBuckets && took > latencyBounds[i] {
		i++
	}
	st.latency[i].Add(1)
	st.latencySum.Add(int64(took))
}

func (s *stats) snapshot() Stats {
	var out Stats
	out.StoreLatency.Bounds = latencyBounds
	for i := range s.stripes {
		c := &s.stripes[i].statCounters
		for j := range c.decisions {
			out.Decisions[j] += c.decisions[j].Load()
		}
		out.UnknownPlans += c.unknownPlans.Load()
		out.DryRunRefusals += c.dryRun.Load()
		out.Penalties += c.penalties.Load()
		out.AutoBans += c.autoBans.Load()
		out.ManualBans += c.manualBans.Load()
		out.BansLifted += c.lifted.Load()
		out.StoreCalls += c.storeCalls.Load()
		out.StoreErrors += c.storeErrors.Load()
		out.StoreTimeouts += c.storeTimeouts.Load()
		out.StoreCanceled += c.storeCanceled.Load()
		for j := range c.latency {
			out.StoreLatency.Counts[j] += c.latency[j].Load()
		}
		out.StoreLatency.Sum += time.Duration(c.latencySum.Load())
		out.CircuitOpens += c.circuitOpens.Load()
		out.CircuitRejected += c.circuitReject.Load()
		out.StoreFailures += c.storeFailures.Load()
		out.Malformed += c.malformed.Load()
	}
	return out
}

// keyHint is a cheap spread of k, for picking a stripe of counters
// (stats.go): its IPv4 address, the two halves of its IPv6 address XORed, or its
// name's length and first bytes.
func keyHint(k Key) uint64 {
	if k.Prefix.IsValid() {
		a := k.Prefix.Addr()
		if a.Is4() {
			b := a.As4()
			return uint64(binary.BigEndian.Uint32(b[:]))
		}
		b := a.As16()
		return binary.BigEndian.Uint64(b[:8]) ^ binary.BigEndian.Uint64(b[8:])
	}
	h := uint64(len(k.Name))
	for i := 0; i < len(k.Name) && i < 8; i++ {
		h = h<<8 | uint64(k.Name[i])
	}
	return h
}
