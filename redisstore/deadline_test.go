package redisstore

import (
	"context"
	"net/netip"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/redis/go-redis/v9"
)

// A Redis call waiting for a free pooled connection gives up at
// StoreTimeout, not at the client's PoolTimeout: go-redis waits on Done.
// The wait is the client's own, so miniredis shows it as well as a real
// server does.
func TestStoreTimeoutBoundsPoolWait(t *testing.T) {
	for _, target := range redisTargets[:2] { // one node: the pool is one client's
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, PoolTimeout: 5 * time.Second, ContextTimeoutEnabled: true, MaxRetries: -1})
			t.Cleanup(func() { c.Close() })
			store := New(c, Options{RangeRefresh: -1, Logger: discardLogger()})
			t.Cleanup(func() { store.Close() })
			ns := testNamespace(t, addr)
			p, err := protect.New(protect.Config{Store: store, Namespace: ns, StoreTimeout: 100 * time.Millisecond, OnStoreError: protect.FailOpen, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1")); d.Err != nil {
				t.Fatalf("VerifyAddr before the pool is taken: %v", d.Err)
			}
			busy := make(chan struct{})
			go func() { // the pool's only connection, busy for 2s
				defer close(busy)
				c.BLPop(context.Background(), 2*time.Second, ns+"never")
			}()
			time.Sleep(50 * time.Millisecond)
			start := time.Now()
			d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1"))
			if took := time.Since(start); d.Err == nil || took > 400*time.Millisecond {
				t.Fatalf("VerifyAddr with the pool taken: %v after %v; want a store error within StoreTimeout (100ms) plus slack", d.Err, took)
			}
			<-busy
		})
	}
}
