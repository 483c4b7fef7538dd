package bench

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// Environment knobs (run.sh sets them):
//   PERF_REDIS_ADDR   loopback Redis for the Redis peers (unset: Redis parts skip)
//   PERF_RESULTS      directory where tests write their tables (unset: not written)
//   PERF_HTTP=1       enable the wrk load test
//   PERF_WRK, PERF_WRK_DURATION, PERF_HTTP_ROUNDS, PERF_WRK_CONNS, PERF_WRK_THREADS

func redisEnvOrSkip(tb testing.TB) *RedisEnv {
	tb.Helper()
	addr := os.Getenv("PERF_REDIS_ADDR")
	if addr == "" {
		tb.Skip("PERF_REDIS_ADDR not set; Redis peers skipped (run.sh starts a Redis and sets it)")
	}
	env, err := NewRedisEnv(addr)
	if err != nil {
		tb.Fatal(err)
	}
	return env
}

func writeResult(tb testing.TB, name, content string) {
	tb.Helper()
	dir := os.Getenv("PERF_RESULTS")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// benchLoop measures Allow over keys round robin. parallelism 0 means a plain
// sequential loop; otherwise b.RunParallel with parallelism*GOMAXPROCS
// goroutines, each starting at a different offset of the key ring.
// Errors and refusals do not abort the run (a peer that errors under
// contention is a result, not a harness failure): they are logged and reported
// as err/op and denied/op, which then show up in the tables.
func benchLoop(b *testing.B, name string, l Limiter, keys []string, parallelism int) {
	ctx := context.Background()
	n := len(keys)
	var denied, errs atomic.Int64
	var firstErr atomic.Pointer[error]
	b.ReportAllocs()
	if parallelism == 0 {
		b.ResetTimer()
		j := 0
		var d, e int64
		for i := 0; i < b.N; i++ {
			ok, err := l.Allow(ctx, keys[j])
			if err != nil {
				e++
				keep := err // only this copy escapes, not err itself
				firstErr.CompareAndSwap(nil, &keep)
			} else if !ok {
				d++
			}
			if j++; j == n {
				j = 0
			}
		}
		b.StopTimer()
		denied.Store(d)
		errs.Store(e)
	} else {
		var seed atomic.Int64
		b.SetParallelism(parallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			j := int((seed.Add(1) * 7919) % int64(n))
			var d, e int64
			for pb.Next() {
				ok, err := l.Allow(ctx, keys[j])
				if err != nil {
					e++
					keep := err // only this copy escapes, not err itself
					firstErr.CompareAndSwap(nil, &keep)
				} else if !ok {
					d++
				}
				if j++; j == n {
					j = 0
				}
			}
			denied.Add(d)
			errs.Add(e)
		})
		b.StopTimer()
	}
	if e := errs.Load(); e > 0 {
		b.ReportMetric(float64(e)/float64(b.N), "err/op")
		b.Logf("%s: %d of %d Allow calls failed, first: %v", name, e, b.N, *firstErr.Load())
	}
	if d := denied.Load(); d > 0 {
		b.ReportMetric(float64(d)/float64(b.N), "denied/op")
		b.Logf("%v", refusedErr(name, d))
	}
}
