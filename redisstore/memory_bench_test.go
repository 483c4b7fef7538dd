package redisstore

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/store"
)

// BenchmarkRedisMemoryPerClient measures what one client costs in a
// redis-server of its own: used_memory (INFO memory) after 100,000
// clients, less before, divided by 100,000. A tracked client is one
// counted request (its counter); a banned one passed BanLimit (its ban
// record, its offense history, its entry in the ban index).
// docs/performance.md gives the figures:
//
//	go test ./redisstore -run '^$' -bench RedisMemoryPerClient -benchtime 1x
func BenchmarkRedisMemoryPerClient(b *testing.B) {
	const clients = 100_000
	for _, tc := range []struct {
		name     string
		banLimit int64
		key      func(i int) protect.Key
	}{
		{"ipv4", 1000, func(i int) protect.Key {
			return protect.Key{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)}
		}},
		{"ipv6-64", 1000, func(i int) protect.Key {
			a := [16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
			return protect.Key{Prefix: netip.PrefixFrom(netip.AddrFrom16(a), 64)}
		}},
		{"banned-ipv4", 0, func(i int) protect.Key {
			return protect.Key{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				srv := redistest.Start(b)
				s := New(dial(srv.Addr), Options{RangeRefresh: -1, BanCacheTTL: -1, Logger: discardLogger()})
				sp, err := s.Space(store.Scope{Namespace: "protect:", Limits: store.Limits{
					MaxRequests: 200, TTL: 10 * time.Second, BanLimit: tc.banLimit, BanDuration: time.Hour,
					BanFactor: 2, MaxBanDuration: 7 * 24 * time.Hour, OffenseWindow: 7 * 24 * time.Hour}})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				if _, err := sp.Take(ctx, tc.key(clients), netip.Addr{}, 1); err != nil { // loads the script
					b.Fatal(err)
				}
				before := usedMemory(b, srv)
				var wg sync.WaitGroup
				for w := range 16 {
					wg.Go(func() {
						for i := w; i < clients; i += 16 {
							if _, err := sp.Take(ctx, tc.key(i), netip.Addr{}, 1); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				after := usedMemory(b, srv)
				b.ReportMetric(float64(after-before)/clients, "B/client")
				s.Close()
			}
		})
	}
}

// usedMemory reads used_memory from INFO memory.
func usedMemory(b *testing.B, srv *redistest.Server) int64 {
	info := srv.Do("INFO", "memory").(string)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("INFO memory: no used_memory")
	return 0
}
