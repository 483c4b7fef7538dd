package redisstore

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/store"
	"github.com/redis/go-redis/v9"
)

// CLIENT KILL TYPE normal, again and again on every master of a
// Cluster under load, loses replies: a script that ran and counted, whose
// answer never arrived. The store never runs it again, so the counter
// never exceeds the calls made, and it holds every count Redis
// acknowledged. The calls go to the store's Space, without the breaker
// of a protector, which would stop calling Redis after a few failures
// and with it the test.
func TestClusterLostRepliesNeverCountTwice(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0, 2*time.Second)
	url := "redis+cluster://" + strings.Join(cl.Addrs(), ",")
	lim := store.Limits{MaxRequests: 1 << 40, TTL: time.Hour, BanLimit: -1, BanDuration: time.Hour, BanFactor: 2, MaxBanDuration: time.Hour, OffenseWindow: time.Hour}
	var spaces []store.Space
	for range 3 {
		s, err := Dial(url, Options{Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		sp, err := s.Space(store.Scope{Namespace: "lost:", Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		spaces = append(spaces, sp)
	}
	addr := netip.MustParseAddr("198.51.100.9")
	key := protect.Key{Prefix: netip.PrefixFrom(addr, 32)}
	var (
		calls, acked, failed, kills atomic.Int64
		wg                          sync.WaitGroup
	)
	stop := make(chan struct{})
	for _, sp := range spaces {
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					calls.Add(1)
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					_, err := sp.Take(ctx, key, addr, 1)
					cancel()
					if err == nil {
						acked.Add(1)
					} else {
						failed.Add(1)
					}
				}
			})
		}
	}
	killers := make([]*redis.Client, len(cl.Nodes))
	for i, n := range cl.Nodes {
		killers[i] = n.Client(t)
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			for _, k := range killers {
				n, err := k.ClientKillByFilter(context.Background(), "TYPE", "normal").Result()
				if err != nil {
					t.Errorf("CLIENT KILL TYPE normal = %v", err)
					return
				}
				kills.Add(n)
			}
		}
	})
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	st, err := spaces[0].Inspect(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d calls: %d answered, %d failed (a lost reply, a refused connection); %d connections killed; counter %d",
		calls.Load(), acked.Load(), failed.Load(), kills.Load(), st.Count)
	if failed.Load() == 0 {
		t.Fatalf("no call failed under %d killed connections: the test lost no reply", kills.Load())
	}
	if st.Count < acked.Load() || st.Count > calls.Load() {
		t.Fatalf("counter = %d, want from %d (acknowledged) to %d (calls)", st.Count, acked.Load(), calls.Load())
	}
}
