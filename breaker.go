package protect

import (
	"errors"
	"sync/atomic"
	"time"
)

// ErrStoreUnavailable is wrapped by Decision.Err when the circuit breaker
// answered for a failing store without calling it.
var ErrStoreUnavailable = errors.New("protect: store unavailable (circuit open)")

const (
	// breakerThreshold consecutive failures open the circuit.
	breakerThreshold = 3
	// breakerCooldown is how long an open circuit answers without calling
	// the store before one probe call is let through.
	breakerCooldown = time.Second
)

// A breaker stops calling a store that keeps failing, so that a dead Redis
// costs one StoreTimeout every cooldown rather than one per request. After
// the cooldown a single probe goes through: success closes the circuit,
// failure opens it for another cooldown. Recovery needs no operator.
//
// One breaker belongs to one store (see circuitStore), so that every
// protector on that store shares it: a dead Redis costs breakerThreshold
// timeouts in all, not that many per protector.
//
// The cooldown is measured on the monotonic clock: elapsed is time since
// an origin taken with Sub, which time.Now's readings answer from the
// monotonic clock. A wall clock stepped back (by an operator, by NTP) must
// not keep the circuit open for as long as the step.
//
// The closed path is one atomic load.
type breaker struct {
	fails     atomic.Int64
	openUntil atomic.Int64 // elapsed nanoseconds; 0 when closed
	probing   atomic.Bool
	elapsed   func() time.Duration
}

// newBreaker returns a closed breaker that measures time by clock, as
// elapsed time since now: monotonic for time.Now, the fake's own time for
// a test's clock.
func newBreaker(clock func() time.Time) *breaker {
	origin := clock()
	return &breaker{elapsed: func() time.Duration { return clock().Sub(origin) }}
}

// deadline is the end of a cooldown that starts now, never 0 (closed).
func (b *breaker) deadline() int64 { return max(int64(b.elapsed()+breakerCooldown), 1) }

// allow reports whether to call the store now.
func (b *breaker) allow() bool {
	until := b.openUntil.Load()
	if until == 0 {
		return true
	}
	if int64(b.elapsed()) < until {
		return false
	}
	return b.probing.CompareAndSwap(false, true)
}

// success records a store call that worked; recovered reports that it
// closed an open circuit.
func (b *breaker) success() (recovered bool) {
	if b.fails.Load() != 0 {
		b.fails.Store(0)
	}
	if b.openUntil.Load() == 0 {
		return false
	}
	b.probing.Store(false)
	return b.openUntil.Swap(0) != 0
}

// failure records a failed store call; opened reports that it opened a
// closed circuit.
func (b *breaker) failure() (opened bool) {
	n := b.fails.Add(1)
	if b.probing.Load() {
		b.openUntil.Store(b.deadline())
		b.probing.Store(false)
		return false
	}
	return n >= breakerThreshold && b.openUntil.CompareAndSwap(0, b.deadline())
}

// release gives back the probe of a call that ended without a verdict on
// the store (its caller gave up): the next call after the cooldown probes
// instead. Outside a probe it changes nothing, since only the probe calls
// the store while the circuit is open.
func (b *breaker) release() { b.probing.Store(false) }

// open reports whether the circuit is open.
func (b *breaker) open() bool { return b.openUntil.Load() != 0 }

// A circuitStore is a store that keeps its own circuit breaker, shared by
// every protector built on it. A store that is not one (a third party's)
// gets a breaker per protector.
type circuitStore interface {
	circuit() *breaker
}

// circuit implements circuitStore: one breaker for the store's one pool.
func (s *RedisStore) circuit() *breaker { return s.brk }
