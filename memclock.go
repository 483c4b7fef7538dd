package protect

import (
	"sync"
	"sync/atomic"
	"time"
)

// A coarseClock tells a MemoryStore the time to within a millisecond for
// the price of an atomic load. Reading the monotonic clock costs a
// vDSO call on every check, which is a large share of a check's own work;
// a counter's expiry needs no finer time than Redis keeps (PX is in
// milliseconds). A goroutine refreshes the time every
// millisecond while the store is in use, and stops after a second without
// a read, so an idle store costs no wake-ups; the next read starts it
// again, with a fresh time.
//
// The time it tells lags the real time by at most a tick (plus scheduling
// delay under load): counters and bans then end a little late, never
// early.
type coarseClock struct {
	epoch   time.Time
	ticks   atomic.Int64 // time since epoch, as of the last refresh
	read    atomic.Bool  // read since the last refresh
	running atomic.Bool
	idle    int        // ticks without a read before the refresher stops
	mu      sync.Mutex // serialises starting and stopping the refresher
	stop    chan struct{}
	wg      sync.WaitGroup
}

const (
	coarseTick = time.Millisecond
	coarseIdle = 1000 // ticks without a read before the refresher stops
)

func newCoarseClock(epoch time.Time) *coarseClock {
	return &coarseClock{epoch: epoch, idle: coarseIdle, stop: make(chan struct{})}
}

// now returns the time since epoch.
func (c *coarseClock) now() int64 {
	if !c.read.Load() { // loaded first: one write per tick, not per call
		c.read.Store(true)
	}
	if !c.running.Load() {
		return c.start()
	}
	return c.ticks.Load()
}

// start refreshes the time and starts the refresher, unless it is running
// or the clock is closed.
func (c *coarseClock) start() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := int64(time.Since(c.epoch))
	c.ticks.Store(t)
	select {
	case <-c.stop:
		return t // closed: every read goes to the real clock
	default:
	}
	if c.running.Load() {
		return t
	}
	c.running.Store(true)
	c.wg.Add(1)
	go c.refresh()
	return t
}

func (c *coarseClock) refresh() {
	defer c.wg.Done()
	tick := time.NewTicker(coarseTick)
	defer tick.Stop()
	idle := 0
	for {
		select {
		case <-c.stop:
			c.running.Store(false)
			return
		case <-tick.C:
		}
		c.ticks.Store(int64(time.Since(c.epoch)))
		if c.read.Swap(false) {
			idle = 0
			continue
		}
		if idle++; idle < c.idle {
			continue
		}
		c.mu.Lock()
		c.running.Store(false)
		c.mu.Unlock()
		return
	}
}

// close stops the refresher for good.
func (c *coarseClock) close() {
	c.mu.Lock()
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.mu.Unlock()
	c.wg.Wait()
}
