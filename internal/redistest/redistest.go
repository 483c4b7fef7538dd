// Package redistest finds the Redis servers protect's tests run against —
// miniredis in the process, a real redis-server and a real Redis Cluster
// when CI started them — and gives each test its own keys on them.
package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/needs"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// A Target is a Redis the tests run against: Addr starts or finds it (a
// real server the environment does not name skips the test, and fails it
// under CI).
type Target struct {
	Name string
	Addr func(t *testing.T) string
}

// Targets are miniredis, the real redis-server of PROTECT_REDIS_ADDR and
// the Redis Cluster of PROTECT_REDIS_CLUSTER_ADDRS.
var Targets = []Target{
	{"miniredis", func(t *testing.T) string { return miniredis.RunT(t).Addr() }},
	{"redis-server", func(t *testing.T) string { return RealAddr(t) }},
	{"redis-cluster", func(t *testing.T) string { return "cluster:" + strings.Join(ClusterAddrs(t), ",") }},
}

// Dial returns a new client of the Redis at addr; "cluster:a,b,c" is a
// Redis Cluster. The client honours context deadlines and never retries,
// as the Redis store needs.
func Dial(addr string) redis.UniversalClient {
	if nodes, ok := strings.CutPrefix(addr, "cluster:"); ok {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(nodes, ","), ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second})
	}
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second})
}

// RealAddr returns PROTECT_REDIS_ADDR. Under CI the real-Redis tests must
// not skip silently, so a missing address fails the test there.
func RealAddr(t testing.TB) string {
	t.Helper()
	return needs.Env(t, "PROTECT_REDIS_ADDR", "the address of a real redis-server; .ci/parts/10-redis.sh starts one")
}

// ClusterAddrs returns PROTECT_REDIS_CLUSTER_ADDRS, the nodes of a real
// Redis Cluster, or skips (fails under CI, which starts one).
func ClusterAddrs(t testing.TB) []string {
	t.Helper()
	return strings.Split(needs.Env(t, "PROTECT_REDIS_CLUSTER_ADDRS", "the nodes of a real Redis Cluster; .ci/parts/10-redis.sh starts one"), ",")
}

// Namespace keeps tests on a shared real Redis apart: it returns a
// namespace of the test's own, and removes every key under it, on every
// master, when the test ends.
func Namespace(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	// Only letters, digits and . _ - : in it, so that it needs no escaping
	// in a SCAN pattern (and cannot hold a brace, a hash tag).
	name := strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-", r)) {
			return r
		}
		return '.'
	}, t.Name())
	ns := fmt.Sprintf("test:%s:%x:", name, rand.Uint64())
	t.Cleanup(func() {
		ctx := context.Background()
		clean := func(ctx context.Context, node *redis.Client) error {
			iter := node.Scan(ctx, 0, ns+"*", 1000).Iterator()
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

// NamespaceAt is Namespace on a client of its own of the Redis at addr.
func NamespaceAt(t *testing.T, addr string) string {
	t.Helper()
	c := Dial(addr)
	t.Cleanup(func() { c.Close() })
	return Namespace(t, c)
}

// AllKeys returns the keys matching pattern on every master.
func AllKeys(ctx context.Context, c redis.UniversalClient, pattern string) ([]string, error) {
	var mu sync.Mutex
	var keys []string
	one := func(ctx context.Context, node *redis.Client) error {
		k, err := node.Keys(ctx, pattern).Result()
		mu.Lock()
		keys = append(keys, k...)
		mu.Unlock()
		return err
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		return keys, cc.ForEachMaster(ctx, one)
	}
	return keys, one(ctx, c.(*redis.Client))
}

// A CountingHook counts the commands a go-redis client sends: one Process
// call is one round trip, a pipeline is one round trip of several.
type CountingHook struct {
	trips atomic.Int64
	mu    sync.Mutex
	names []string
}

// DialHook implements redis.Hook.
func (h *CountingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *CountingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if handshake(cmd) {
			return next(ctx, cmd)
		}
		h.trips.Add(1)
		h.mu.Lock()
		h.names = append(h.names, cmd.Name())
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

// handshake reports whether cmd opens a connection (HELLO, CLIENT
// SETINFO): the pool dials one when it needs one, which is not a round
// trip of the operation counted.
func handshake(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello":
		return true
	case "client":
		args := cmd.Args()
		return len(args) > 1 && strings.EqualFold(fmt.Sprint(args[1]), "setinfo")
	}
	return false
}

// ProcessPipelineHook implements redis.Hook.
func (h *CountingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		return next(ctx, cmds)
	}
}

// Take returns and resets the round trips counted and the names of the
// commands sent alone.
func (h *CountingHook) Take() (int64, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	names := h.names
	h.names = nil
	return h.trips.Swap(0), names
}
