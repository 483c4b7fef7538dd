package store

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrStoreUnavailable is wrapped by Decision.Err when the circuit breaker
// answered for a failing store without calling it.
var ErrStoreUnavailable = errors.New("protect: store unavailable (circuit open)")

// breakerThreshold consecutive failures open the circuit.
const breakerThreshold = 3

// CircuitCooldown is how long an open Circuit answers without calling the
// store before one probe call is let through: the Retry-After of a
// request that FailClosed refuses.
const CircuitCooldown = time.Second

// A Circuit is a circuit breaker in front of a store: after three
// failures in a row it stops calling the store for a second, so that a
// dead Redis costs one StoreTimeout a second rather than one per request.
// After the cooldown a single probe goes through: success closes the
// circuit, failure opens it for another cooldown. Recovery needs no
// operator.
//
// A store that keeps one Circuit and hands it out (CircuitStore) gives
// every protector built on it one breaker: a dead Redis then costs three
// timeouts in all, not three per protector. The zero Circuit is closed;
// it measures time by the clock of the first protector that uses it
// (Config.Clock, so that a test's fake clock moves it), as elapsed time,
// so that a wall clock stepped back (by an operator, by NTP) does not
// keep the circuit open for as long as the step: time.Now's readings
// subtract on the monotonic clock.
//
// The closed path is one atomic load.
type Circuit struct {
	fails     atomic.Int64
	openUntil atomic.Int64 // elapsed nanoseconds; 0 when closed
	probing   atomic.Bool
	once      sync.Once
	elapsed   func() time.Duration
}

// SetClock sets the clock the circuit measures its cooldown by, the
// first time it is called; later calls change nothing. Nil is time.Now.
func (b *Circuit) SetClock(clock func() time.Time) {
	b.once.Do(func() {
		if clock == nil {
			clock = time.Now
		}
		origin := clock()
		b.elapsed = func() time.Duration { return clock().Sub(origin) }
	})
}

// deadline is the end of a cooldown that starts now, never 0 (closed).
func (b *Circuit) deadline() int64 { return max(int64(b.since()+CircuitCooldown), 1) }

// since is the time elapsed on the circuit's clock (time.Now when
// SetClock was never called).
func (b *Circuit) since() time.Duration {
	b.SetClock(nil)
	return b.elapsed()
}

// Allow reports whether to call the store now: the circuit is closed,
// or its cooldown is over and this call is the one probe.
func (b *Circuit) Allow() bool {
	until := b.openUntil.Load()
	if until == 0 {
		return true
	}
	if int64(b.since()) < until {
		return false
	}
	return b.probing.CompareAndSwap(false, true)
}

// Success records a store call that worked; recovered reports that it
// closed an open circuit.
func (b *Circuit) Success() (recovered bool) {
	if b.fails.Load() != 0 {
		b.fails.Store(0)
	}
	if b.openUntil.Load() == 0 {
		return false
	}
	b.probing.Store(false)
	return b.openUntil.Swap(0) != 0
}

// Failure records a failed store call; opened reports that it opened a
// closed circuit.
func (b *Circuit) Failure() (opened bool) {
	n := b.fails.Add(1)
	if b.probing.Load() {
		b.openUntil.Store(b.deadline())
		b.probing.Store(false)
		return false
	}
	return n >= breakerThreshold && b.openUntil.CompareAndSwap(0, b.deadline())
}

// Release gives back the probe of a call that ended without a verdict on
// the store (its caller gave up): the next call after the cooldown probes
// instead. Outside a probe it changes nothing, since only the probe calls
// the store while the circuit is open.
func (b *Circuit) Release() { b.probing.Store(false) }

// Open reports whether the circuit is open.
func (b *Circuit) Open() bool { return b.openUntil.Load() != 0 }
