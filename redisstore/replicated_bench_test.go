package redisstore

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkTakeWaitReplicas counts one hot address on a master with one
// replica, both on loopback, without WaitReplicas and with it: the
// price of the WAIT that rides in each count's round trip.
func BenchmarkTakeWaitReplicas(b *testing.B) {
	master := redistest.Start(b)
	redistest.StartReplica(b, master)
	for _, wait := range []int{0, 1} {
		c := redis.NewClient(&redis.Options{Addr: master.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		b.Cleanup(func() { c.Close() })
		if wait > 0 {
			caughtUp(b, c, "caught-up")
		}
		s := New(c, Options{Logger: discardLogger(), WaitReplicas: wait, WaitTimeout: 500 * time.Millisecond})
		b.Cleanup(func() { s.Close() })
		p, err := protect.New(protect.Config{Store: s, Namespace: fmt.Sprintf("bench%d:", wait), MaxRequests: 1 << 40, BanLimit: -1, StoreTimeout: time.Second, Logger: discardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		addr := netip.MustParseAddr("203.0.113.7")
		p.VerifyAddr(b.Context(), addr)
		b.Run(fmt.Sprintf("wait=%d/seq", wait), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d, _ := p.VerifyAddr(b.Context(), addr); d.Err != nil {
					b.Fatal(d.Err)
				}
			}
		})
		b.Run(fmt.Sprintf("wait=%d/parallel", wait), func(b *testing.B) {
			var errs atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if d, _ := p.VerifyAddr(b.Context(), addr); d.Err != nil {
						errs.Add(1)
					}
				}
			})
			if n := errs.Load(); n != 0 {
				b.Fatalf("%d errors on one hot key", n)
			}
		})
	}
}
