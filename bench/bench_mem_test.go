package bench

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

var memScenarios = []struct {
	name     string
	keys     int
	shuffled bool // filled in an order other than the one measured
}{
	{name: "hot", keys: 1},
	{name: "keys=10k", keys: 10_000},
	{name: "shuffled=10k", keys: 10_000, shuffled: true},
	{name: "keys=1M", keys: 1_000_000},
}

// BenchmarkMem: ns/op and allocs/op of Allow for every in-memory peer.
// Each store is pre-filled with the scenario's keys, so the numbers are the
// steady state (existing keys), round robin over the key set.
//
// In keys=10k the round robin follows the order the store was filled in,
// and a store that keeps the caller's key string keeps the very string it
// is later asked with. So a peer that allocates per key finds its objects
// in the order of their addresses, and compares its keys by pointer
// without reading their bytes. shuffled=10k (named so that a -bench
// pattern for keys=10k does not match it) fills the store in a shuffled
// order (fixed seed), each key a copy made in that order, and then
// measures the same round robin: neither holds there, as neither holds
// for traffic whose order is not the order in which its clients were
// first seen.
//
//	Mem/<scenario>/<peer>/seq   one goroutine
//	Mem/<scenario>/<peer>/par   b.RunParallel, GOMAXPROCS goroutines
func BenchmarkMem(b *testing.B) {
	ctx := context.Background()
	for _, sc := range memScenarios {
		for _, p := range MemoryPeers() {
			b.Run(sc.name+"/"+p.Name, func(b *testing.B) {
				keys := KeySet(sc.keys)
				l, err := p.New(Generous)
				if err != nil {
					b.Fatal(err)
				}
				defer CloseLimiter(l)
				fill := keys
				if sc.shuffled {
					fill = slices.Clone(keys) // KeySet's slice is shared
					rand.New(rand.NewPCG(1, 2)).Shuffle(len(fill), func(i, j int) { fill[i], fill[j] = fill[j], fill[i] })
					for i := range fill {
						fill[i] = strings.Clone(fill[i]) // a store that keeps the key keeps this copy
					}
				}
				for _, k := range fill {
					if _, err := l.Allow(ctx, k); err != nil {
						b.Fatal(err)
					}
				}
				b.Run("seq", func(b *testing.B) { benchLoop(b, p.Name, l, keys, 0) })
				b.Run("par", func(b *testing.B) { benchLoop(b, p.Name, l, keys, 1) })
			})
		}
	}
}

// BenchmarkFootprint inserts 1,000,000 distinct IP keys into a fresh store
// and reports the retained heap per key (after two GCs), plus per-insert
// cost. One measurement per call: run it with -benchtime=1x. The key string
// is built on the fly, as it would be from a request (1 alloc of ~16 B per
// key in allocs/op and B/op comes from that, identical for every peer); a
// store that keeps the key keeps that string, which is part of heapB/key.
func BenchmarkFootprint(b *testing.B) {
	const n = 1_000_000
	ctx := context.Background()
	for _, p := range MemoryPeers() {
		b.Run(p.Name, func(b *testing.B) {
			var m0, m1, m2 runtime.MemStats
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&m0)
			l, err := p.New(Generous)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			for i := 0; i < n; i++ {
				ok, err := l.Allow(ctx, IPKey(i))
				if err != nil || !ok {
					b.Fatalf("%s: allowed=%v err=%v", p.Name, ok, err)
				}
			}
			el := time.Since(start)
			runtime.ReadMemStats(&m1)
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&m2)
			runtime.KeepAlive(l)
			retained := int64(m2.HeapAlloc) - int64(m0.HeapAlloc)
			b.ReportMetric(float64(el.Nanoseconds())/n, "ns/op")
			b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/n, "allocs/op")
			b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/n, "B/op")
			b.ReportMetric(float64(retained)/n, "heapB/key")
			b.ReportMetric(float64(int64(m2.HeapObjects)-int64(m0.HeapObjects))/n, "objs/key")
			CloseLimiter(l)
		})
	}
}
