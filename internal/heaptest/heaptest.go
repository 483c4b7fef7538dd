// Package heaptest measures the heap for the tests that bound it. It
// measures two things, named apart:
//
//   - what stays: [Live] is the heap in use after a collection, so that
//     the difference of two calls is what the code between them keeps;
//   - what a call needs on its way: [PeakAlloc] and [PeakInuse] sample
//     the heap while a function runs and return the most it held above
//     what it held before, garbage included.
//
// It is machinery of the project's tests; a non-test file only so that
// every package's tests can import it.
package heaptest

import (
	"runtime"
	"time"
)

// period is how often PeakAlloc and PeakInuse sample the heap: each
// sample stops the world for microseconds.
const period = time.Millisecond

// Live collects garbage and returns the bytes of live heap objects
// (runtime.MemStats.HeapAlloc).
func Live() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// PeakAlloc runs f and returns the most runtime.MemStats.HeapAlloc (bytes
// of heap objects, reachable or not yet collected) stood above its value
// after a collection before f, sampled every millisecond as f runs; 0
// if it never stood above.
func PeakAlloc(f func()) uint64 {
	return peak(f, func(ms *runtime.MemStats) uint64 { return ms.HeapAlloc })
}

// PeakInuse is PeakAlloc of runtime.MemStats.HeapInuse: the bytes of the
// heap's spans in use, which counts what fragmentation holds as well as
// the objects.
func PeakInuse(f func()) uint64 {
	return peak(f, func(ms *runtime.MemStats) uint64 { return ms.HeapInuse })
}

// peak runs f and returns the most of field above its value at the
// start, sampled every period until f returns (or exits, as t.Fatal
// makes it).
func peak(f func(), field func(*runtime.MemStats) uint64) uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := field(&ms)
	var top uint64
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(period)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			top = max(top, field(&ms))
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	func() {
		defer close(stop) // also when f exits through runtime.Goexit
		f()
	}()
	<-sampled
	if top < base {
		return 0
	}
	return top - base
}
