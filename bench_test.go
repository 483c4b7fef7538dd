package protect

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// benchProtector never limits nor bans, so every iteration takes the full
// counted path.
func benchProtector(b *testing.B) *Protector {
	b.Helper()
	p, err := New(Config{MaxRequests: 1 << 62, BanLimit: -1, Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}

func benchAddrs(n int) []netip.Addr {
	addrs := make([]netip.Addr, n)
	for i := range addrs {
		addrs[i] = netip.AddrFrom4([4]byte{byte(11 + i>>24), byte(i >> 16), byte(i >> 8), byte(i)})
	}
	return addrs
}

// BenchmarkVerifyAddr measures one goroutine on one hot address, 10k and
// 1M addresses; BenchmarkVerifyAddrParallel the same from GOMAXPROCS
// goroutines.
func BenchmarkVerifyAddr(b *testing.B)         { benchVerifyAddr(b, false) }
func BenchmarkVerifyAddrParallel(b *testing.B) { benchVerifyAddr(b, true) }

func benchVerifyAddr(b *testing.B, parallel bool) {
	ctx := context.Background()
	for _, n := range []int{1, 10_000, 1_000_000} {
		addrs := benchAddrs(n)
		name := fmt.Sprintf("keys=%d", n)
		if n == 1 {
			name = "hot"
		}
		b.Run(name, func(b *testing.B) {
			p := benchProtector(b)
			for _, a := range addrs {
				p.VerifyAddr(ctx, a)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if !parallel {
				i := 0
				for b.Loop() {
					p.VerifyAddr(ctx, addrs[i])
					if i++; i == n {
						i = 0
					}
				}
				return
			}
			var seq atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := int(seq.Add(7919)) % n
				for pb.Next() {
					p.VerifyAddr(ctx, addrs[i])
					if i++; i == n {
						i = 0
					}
				}
			})
		})
	}
}

// BenchmarkHeapPerKey reports the heap one tracked address costs at 1M
// addresses (B/key).
func BenchmarkHeapPerKey(b *testing.B) {
	const n = 1_000_000
	addrs := benchAddrs(n)
	ctx := context.Background()
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		p, _ := New(Config{MaxRequests: 1 << 62, BanLimit: -1, Logger: discardLogger()})
		for _, a := range addrs {
			p.VerifyAddr(ctx, a)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if got := p.store.(*MemoryStore).Len(); got != n {
			b.Fatalf("%d keys tracked", got)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/key")
		runtime.KeepAlive(p)
		p.Close()
	}
}

func BenchmarkVerify(b *testing.B) {
	p, err := New(Config{MaxRequests: 1 << 62, BanLimit: -1, TrustedProxies: []string{"10.0.0.0/8"}, Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:5555"
	r.Header.Set("X-Forwarded-For", "198.51.100.1, 203.0.113.7, 10.0.0.2")
	b.ReportAllocs()
	for b.Loop() {
		p.Verify(r.Context(), r)
	}
}

// BenchmarkHTTP compares a net/http hello world with and without the
// middleware, over real loopback connections with keep-alive.
func BenchmarkHTTP(b *testing.B) {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	p := benchProtector(b)
	for _, tt := range []struct {
		name string
		h    http.Handler
	}{{"bare", hello}, {"protected", p.Middleware(hello)}} {
		b.Run(tt.name, func(b *testing.B) {
			srv := httptest.NewServer(tt.h)
			b.Cleanup(srv.Close)
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			b.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(srv.URL)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}

// redisBenchClient connects to PROTECT_REDIS_ADDR with the options
// DialRedis uses.
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
	s := NewRedisStore(c, RedisOptions{Logger: discardLogger()})
	b.Cleanup(func() { s.Close() })
	p, err := New(Config{Store: s, Namespace: fmt.Sprintf("bench:%x:", rand.Uint64()), MaxRequests: 1 << 40, BanLimit: -1, StoreTimeout: time.Second, Logger: discardLogger()})
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
