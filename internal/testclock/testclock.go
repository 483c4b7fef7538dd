// Package testclock is a clock that tests move by hand, so that nothing
// sleeps: every package of protect that takes a clock is tested on one.
package testclock

import (
	"sync"
	"time"
)

// A Clock tells a time that moves only when Advance is called. The zero
// Clock tells the zero time; New starts one at a fixed date.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock set to a fixed date in UTC.
func New() *Clock { return &Clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// At returns a clock set to t.
func At(t time.Time) *Clock { return &Clock{t: t} }
