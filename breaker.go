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
// The closed path is one atomic load.
type breaker struct {
	fails     atomic.Int64
	openUntil atomic.Int64 // unix nanoseconds; 0 when closed
	probing   atomic.Bool
}

// allow reports whether to call the store at now.
func (b *breaker) allow(now time.Time) bool {
	until := b.openUntil.Load()
	if until == 0 {
		return true
	}
	if now.UnixNano() < until {
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
func (b *breaker) failure(now time.Time) (opened bool) {
	n := b.fails.Add(1)
	if b.probing.Load() {
		b.openUntil.Store(now.Add(breakerCooldown).UnixNano())
		b.probing.Store(false)
		return false
	}
	return n >= breakerThreshold && b.openUntil.CompareAndSwap(0, now.Add(breakerCooldown).UnixNano())
}

// release gives back the probe of a call that ended without a verdict on
// the store (its caller gave up): the next call after the cooldown probes
// instead. Outside a probe it changes nothing, since only the probe calls
// the store while the circuit is open.
func (b *breaker) release() { b.probing.Store(false) }

// open reports whether the circuit is open.
func (b *breaker) open() bool { return b.openUntil.Load() != 0 }
