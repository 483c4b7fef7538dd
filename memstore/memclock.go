package memstore

import (
	"sync"
	"sync/atomic"
	"time"
)

// A coarseClock tells a Store the time to within a millisecond for
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
	epoch time.Time
	ticks atomic.Int64 // time since epoch, as of the last refresh
	// state holds clockRead (read since the last refresh) and
	// clockRunning in one word, so that a read is one load of each word.
	state atomic.Uint32
	idle  int        // ticks without a read before the refresher stops
	mu    sync.Mutex // serialises starting and stopping the refresher
	stop  chan struct{}
	wg    sync.WaitGroup
}

const (
	clockRead    = 1 << iota // read since the last refresh
	clockRunning             // the refresher runs
)

const (
	coarseTick = time.Millisecond
	coarseIdle = 1000 // ticks without a read before the refresher stops
)

func newCoarseClock(epoch time.Time) *coarseClock {
	return &coarseClock{epoch: epoch, idle: coarseIdle, stop: make(chan struct{})}
}

// now returns the time since epoch. Read and running, the common case, it
// inlines.
func (c *coarseClock) now() int64 {
	if c.state.Load() == clockRead|clockRunning {
		return c.ticks.Load()
	}
	return c.wake()
}

// wake is now for a clock not read since its last refresh, which it notes
// (one write per tick, not per call), or not running, which it starts.
func (c *coarseClock) wake() int64 {
	if c.state.Or(clockRead)&clockRunning == 0 {
		return c.start()
	}
	return c.ticks.Load()
}

// running reports whether the refresher runs.
func (c *coarseClock) running() bool { return c.state.Load()&clockRunning != 0 }

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
	if c.running() {
		return t
	}
	c.state.Or(clockRunning)
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
			c.state.And(^uint32(clockRunning))
			return
		case <-tick.C:
		}
		c.ticks.Store(int64(time.Since(c.epoch)))
		if c.state.And(^uint32(clockRead))&clockRead != 0 {
			idle = 0
			continue
		}
		if idle++; idle < c.idle {
			continue
		}
		c.mu.Lock()
		c.state.And(^uint32(clockRunning))
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
