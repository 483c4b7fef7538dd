package protect

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/httpprotect/protect/internal/heaptest"
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
		before := heaptest.Live()
		p, _ := New(Config{MaxRequests: 1 << 62, BanLimit: -1, Logger: discardLogger()})
		for _, a := range addrs {
			p.VerifyAddr(ctx, a)
		}
		after := heaptest.Live()
		if got := p.store.(*MemoryStore).Len(); got != n {
			b.Fatalf("MemoryStore.Len() = %d, want %d", got, n)
		}
		b.ReportMetric(float64(after-before)/n, "B/key")
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
						b.Errorf("GET %s = %d, want 200", srv.URL, resp.StatusCode)
						return
					}
				}
			})
		})
	}
}
