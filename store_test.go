package protect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// realRedisAddr returns PROTECT_REDIS_ADDR. Under CI the real-Redis tests
// must not skip silently, so a missing address fails the test there.
func realRedisAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("PROTECT_REDIS_ADDR")
	if addr == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but PROTECT_REDIS_ADDR is not: .ci/run must start redis-server")
		}
		t.Skip("PROTECT_REDIS_ADDR not set: no real Redis")
	}
	return addr
}

// clusterAddrs returns PROTECT_REDIS_CLUSTER_ADDRS, the nodes of a real
// Redis Cluster, or skips (fails under CI, which starts one).
func clusterAddrs(t testing.TB) []string {
	t.Helper()
	addrs := os.Getenv("PROTECT_REDIS_CLUSTER_ADDRS")
	if addrs == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but PROTECT_REDIS_CLUSTER_ADDRS is not: .ci/run must start a cluster")
		}
		t.Skip("PROTECT_REDIS_CLUSTER_ADDRS not set: no Redis Cluster")
	}
	return strings.Split(addrs, ",")
}

// uniqueNamespace keeps tests on a shared real Redis apart, and removes
// every key under it, on every master, when the test ends.
func uniqueNamespace(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	ns := fmt.Sprintf("test:%s:%x:", strings.ReplaceAll(t.Name(), "/", "."), rand.Uint64())
	t.Cleanup(func() {
		ctx := context.Background()
		clean := func(ctx context.Context, node *redis.Client) error {
			iter := node.Scan(ctx, 0, globEscape(ns)+"*", 1000).Iterator()
			for iter.Next(ctx) {
				node.Del(ctx, iter.Val())
			}
			return nil
		}
		if cc, ok := c.(*redis.ClusterClient); ok {
			cc.ForEachMaster(ctx, clean)
		} else if rc, ok := c.(*redis.Client); ok {
			clean(ctx, rc)
		}
	})
	return ns
}
