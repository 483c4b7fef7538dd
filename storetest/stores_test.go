package storetest_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/testclock"
	"github.com/httpprotect/protect/redisstore"
	"github.com/httpprotect/protect/storetest"
)

// protect's own stores, through the suite: memory and miniredis on a fake
// clock; a real redis-server (PROTECT_REDIS_ADDR) and a real Redis
// Cluster (PROTECT_REDIS_CLUSTER_ADDRS) on real time.

func TestMemoryStore(t *testing.T) {
	storetest.RunEnv(t, func(t *testing.T) storetest.Env {
		clk := testclock.At(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
		s := protect.NewMemoryStore(protect.MemoryOptions{Clock: clk.Now, SweepInterval: -1})
		t.Cleanup(func() { s.Close() })
		return storetest.Env{Store: s, Wait: clk.Advance, Now: clk.Now}
	})
}

func TestMiniredis(t *testing.T) {
	storetest.RunEnv(t, func(t *testing.T) storetest.Env {
		m := miniredis.RunT(t)
		clk := testclock.At(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
		m.SetTime(clk.Now())
		c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		s := redisstore.New(c, redisstore.Options{Clock: clk.Now, RangeRefresh: -1, Logger: discard})
		t.Cleanup(func() { s.Close() })
		return storetest.Env{Store: s, Now: clk.Now, Wait: func(d time.Duration) {
			clk.Advance(d)
			m.SetTime(clk.Now())
			m.FastForward(d)
		}}
	})
}

func TestRedisServer(t *testing.T) {
	addr := envOrSkip(t, "PROTECT_REDIS_ADDR")
	storetest.RunEnv(t, func(t *testing.T) storetest.Env {
		return realEnv(t, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1}))
	})
}

func TestRedisCluster(t *testing.T) {
	addrs := strings.Split(envOrSkip(t, "PROTECT_REDIS_CLUSTER_ADDRS"), ",")
	storetest.RunEnv(t, func(t *testing.T) storetest.Env {
		return realEnv(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true, MaxRetries: -1}))
	})
}

// envOrSkip returns an environment variable, or skips the test without
// it. Under CI, which starts the servers, a missing one fails instead.
func envOrSkip(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but %s is not: .ci/run must start the server", name)
		}
		t.Skipf("%s not set", name)
	}
	return v
}

// realEnv is a store on a real server, in a namespace of the test's own,
// every key of which is deleted, on every master, when the test ends.
func realEnv(t *testing.T, c redis.UniversalClient) storetest.Env {
	t.Helper()
	ns := fmt.Sprintf("storetest:%s:%x:", strings.ReplaceAll(t.Name(), "/", "."), rand.Uint64())
	s := redisstore.New(c, redisstore.Options{RangeRefresh: -1, Logger: discard})
	t.Cleanup(func() {
		s.Close()
		clean := func(ctx context.Context, node *redis.Client) error {
			iter := node.Scan(ctx, 0, ns+"*", 1000).Iterator()
			for iter.Next(ctx) {
				node.Del(ctx, iter.Val())
			}
			return iter.Err()
		}
		ctx := context.Background()
		if cc, ok := c.(*redis.ClusterClient); ok {
			cc.ForEachMaster(ctx, clean)
		} else {
			clean(ctx, c.(*redis.Client))
		}
		c.Close()
	})
	return storetest.Env{Store: s, Namespace: ns}
}

var discard = slog.New(slog.DiscardHandler)
