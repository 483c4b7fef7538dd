package bench

import (
	"context"
	"testing"
)

// RedisParallelism: b.RunParallel runs RedisParallelism*GOMAXPROCS goroutines
// (32 on 2 cores, the same concurrency as wrk -c32).
const RedisParallelism = 16

// BenchmarkRedis: ns/op per Allow over loopback for every Redis peer, with
// the number of Redis commands (INFO commandstats delta, in-script commands
// included) and client round trips (go-redis hook) per Allow.
//
//	Redis/<peer>/seq   one goroutine
//	Redis/<peer>/par   RedisParallelism*GOMAXPROCS goroutines
func BenchmarkRedis(b *testing.B) {
	env := redisEnvOrSkip(b)
	defer env.Close()
	ctx := context.Background()
	keys := KeySet(10_000)
	for _, p := range RedisPeers() {
		b.Run(p.Name, func(b *testing.B) {
			if err := env.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			l, err := p.New(env, Generous)
			if err != nil {
				b.Fatal(err)
			}
			defer env.CloseClients()
			defer CloseLimiter(l)
			for _, k := range keys { // create the keys, load scripts
				if _, err := l.Allow(ctx, k); err != nil {
					b.Fatal(err)
				}
			}
			for _, mode := range []struct {
				name string
				par  int
			}{{"seq", 0}, {"par", RedisParallelism}} {
				b.Run(mode.name, func(b *testing.B) {
					s0, err := env.CommandStats(ctx)
					if err != nil {
						b.Fatal(err)
					}
					rt0 := env.RoundTrips.Load()
					benchLoop(b, p.Name, l, keys, mode.par)
					rt1 := env.RoundTrips.Load()
					s1, err := env.CommandStats(ctx)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(Sum(StatsDelta(s0, s1)))/float64(b.N), "cmds/op")
					b.ReportMetric(float64(rt1-rt0)/float64(b.N), "rtt/op")
				})
			}
		})
	}
}
