package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/redis/go-redis/v9"
)

// redisBenchClient connects to PROTECT_REDIS_ADDR with the options
// Dial uses.
func redisBenchClient(b *testing.B) *redis.Client {
	b.Helper()
	addr := os.Getenv("PROTECT_REDIS_ADDR")
	if addr == "" {
		b.Skip("PROTECT_REDIS_ADDR not set")
	}
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkRedisPing is the floor for BenchmarkVerifyRedis: one bare
// round trip on the same server with the same client.
func BenchmarkRedisPing(b *testing.B) {
	c := redisBenchClient(b)
	ctx := context.Background()
	b.Run("seq", func(b *testing.B) {
		for b.Loop() {
			if err := c.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(8) // 16 requests in flight on this machine: load, not latency
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := c.Ping(ctx).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkVerifyRedis counts one hot address on a real Redis: one
// EVALSHA per request. Any store error under load fails the benchmark.
func BenchmarkVerifyRedis(b *testing.B) {
	c := redisBenchClient(b)
	s := New(c, Options{Logger: discardLogger()})
	b.Cleanup(func() { s.Close() })
	p, err := protect.New(protect.Config{Store: s, Namespace: fmt.Sprintf("bench:%x:", rand.Uint64()), MaxRequests: 1 << 40, BanLimit: -1, StoreTimeout: time.Second, Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	ctx := context.Background()
	addr := netip.MustParseAddr("203.0.113.7")
	p.VerifyAddr(ctx, addr)
	b.Run("seq", func(b *testing.B) {
		for b.Loop() {
			if d, _ := p.VerifyAddr(ctx, addr); d.Err != nil {
				b.Fatal(d.Err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var errs atomic.Int64
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if d, _ := p.VerifyAddr(ctx, addr); d.Err != nil {
					errs.Add(1)
				}
			}
		})
		if n := errs.Load(); n != 0 {
			b.Fatalf("%d errors on one hot key", n)
		}
	})
}

// BenchmarkVerifyConsumerRedis decides one hot consumer on a real Redis
// under plans of 1, 2 and 8 limits: one EVALSHA each, whatever the number
// of limits (compare with BenchmarkRedisPing).
func BenchmarkVerifyConsumerRedis(b *testing.B) {
	c := redisBenchClient(b)
	s := New(c, Options{Logger: discardLogger()})
	b.Cleanup(func() { s.Close() })
	p, err := protect.New(protect.Config{Store: s, Namespace: fmt.Sprintf("bench:%x:", rand.Uint64()), BanLimit: -1, StoreTimeout: time.Second, Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	eight := []protect.PlanLimit{protect.Quota{Limit: 1 << 40, Period: protect.Hourly}, protect.Quota{Limit: 1 << 40, Period: protect.Daily}, protect.Quota{Limit: 1 << 40, Period: protect.Monthly}}
	for i := range 5 {
		eight = append(eight, protect.Rate{Limit: 1 << 32, Period: time.Duration(i+1) * time.Hour})
	}
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		limits []protect.PlanLimit
	}{
		{"limits=1", []protect.PlanLimit{protect.Rate{Name: "rate", Limit: 1 << 32, Period: time.Hour}}},
		{"limits=2", []protect.PlanLimit{protect.Rate{Name: "rate", Limit: 1 << 32, Period: time.Hour}, protect.Quota{Limit: 1 << 40, Period: protect.Monthly}}},
		{"limits=8", eight},
	} {
		plan := mustPlan(b, c.name, c.limits...)
		p.VerifyConsumer(ctx, "cus_bench", plan)
		b.Run(c.name+"/seq", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d, _ := p.VerifyConsumer(ctx, "cus_bench", plan); d.Err != nil || d.Refused() {
					b.Fatal(d.Status, d.Err)
				}
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			var errs atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if d, _ := p.VerifyConsumer(ctx, "cus_bench", plan); d.Err != nil {
						errs.Add(1)
					}
				}
			})
			if n := errs.Load(); n != 0 {
				b.Fatalf("%d errors on one hot consumer", n)
			}
		})
	}
}
