package protect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// A storeEnv is one store under test with the means to move its time.
type storeEnv struct {
	store Store
	ns    string
	unit  time.Duration       // one "second" of the suite on this store
	wait  func(time.Duration) // let d pass, as the store sees it
}

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

func newMiniredisEnv(t *testing.T) storeEnv {
	t.Helper()
	m := miniredis.RunT(t)
	clk := newFakeClock()
	m.SetTime(clk.Now())
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	s := NewRedisStore(c, RedisOptions{Clock: clk.Now, RangeRefresh: -1, Logger: discardLogger()})
	t.Cleanup(func() { s.Close() })
	return storeEnv{store: s, ns: "protect:", unit: time.Second, wait: func(d time.Duration) {
		clk.Advance(d)
		m.SetTime(clk.Now())
		m.FastForward(d)
	}}
}

func newRealRedisEnv(t *testing.T) storeEnv { return realEnv(t, dial(realRedisAddr(t))) }

func newClusterEnv(t *testing.T) storeEnv {
	return realEnv(t, dial("cluster:"+strings.Join(clusterAddrs(t), ",")))
}

// realEnv is a store on a real Redis, where real time passes: the suite's
// "second" is 40ms, and waits sleep.
func realEnv(t *testing.T, c redis.UniversalClient) storeEnv {
	t.Helper()
	t.Cleanup(func() { c.Close() })
	s := NewRedisStore(c, RedisOptions{RangeRefresh: -1, Logger: discardLogger()})
	t.Cleanup(func() { s.Close() })
	return storeEnv{store: s, ns: uniqueNamespace(t, c), unit: 40 * time.Millisecond, wait: time.Sleep}
}

func newMemoryEnv(t *testing.T) storeEnv {
	t.Helper()
	s, clk := newTestMemoryStore(t, MemoryOptions{})
	return storeEnv{store: s, ns: "protect:", unit: time.Second, wait: clk.Advance}
}

// eachStore runs a test against every store: memory, miniredis, a real
// redis-server when PROTECT_REDIS_ADDR is set, and a real Redis Cluster
// when PROTECT_REDIS_CLUSTER_ADDRS is.
func eachStore(t *testing.T, test func(t *testing.T, env storeEnv)) {
	t.Helper()
	for _, s := range []struct {
		name string
		make func(*testing.T) storeEnv
	}{{"memory", newMemoryEnv}, {"miniredis", newMiniredisEnv}, {"redis-server", newRealRedisEnv}, {"redis-cluster", newClusterEnv}} {
		t.Run(s.name, func(t *testing.T) { test(t, s.make(t)) })
	}
}

func suiteLimits(u time.Duration) *Limits {
	return &Limits{TTL: 10 * u, BanLimit: 5, BanDuration: 60 * u, BanFactor: 2, MaxBanDuration: 150 * u, OffenseWindow: 1000 * u}
}

func hostKey(s string) (Key, netip.Addr) {
	a := netip.MustParseAddr(s)
	return Key{Prefix: netip.PrefixFrom(a, a.BitLen())}, a
}

func TestStoreThresholds(t *testing.T) {
	eachStore(t, func(t *testing.T, env storeEnv) {
		ctx, lim := t.Context(), suiteLimits(env.unit)
		k, a := hostKey("192.0.2.1")
		for i := int64(1); i <= 5; i++ {
			r, err := env.store.Take(ctx, env.ns, k, a, lim)
			if err != nil || r.Count != i || r.Banned {
				t.Fatalf("take %d: %+v %v", i, r, err)
			}
		}
		// The count passing BanLimit (> 5, not >= 5) writes the ban.
		r, err := env.store.Take(ctx, env.ns, k, a, lim)
		if err != nil || !r.Banned || !r.NewBan || r.Count != 6 || r.Ban.Offense != 1 || r.Ban.Source != SourceAuto ||
			r.Ban.Key != k || r.BanLeft != lim.BanDuration || !r.Ban.Expires.Equal(r.Ban.Created.Add(lim.BanDuration)) {
			t.Fatalf("take 6: %+v %+v %v", r, r.Ban, err)
		}
		r, _ = env.store.Take(ctx, env.ns, k, a, lim)
		if !r.Banned || r.NewBan || r.Count != 0 {
			t.Fatalf("take 7: %+v", r)
		}
		// A negative BanLimit never bans.
		k2, a2 := hostKey("192.0.2.2")
		never := *lim
		never.BanLimit = -1
		for range 20 {
			r, _ = env.store.Take(ctx, env.ns, k2, a2, &never)
		}
		if r.Banned || r.Count != 20 {
			t.Fatalf("BanLimit -1: %+v", r)
		}
	})
}

func TestStoreExpiry(t *testing.T) {
	eachStore(t, func(t *testing.T, env storeEnv) {
		ctx, lim := t.Context(), suiteLimits(env.unit)
		k, a := hostKey("2001:db8::1")
		env.store.Take(ctx, env.ns, k, a, lim)
		env.wait(6 * env.unit) // activity within TTL keeps the stream
		r, _ := env.store.Take(ctx, env.ns, k, a, lim)
		if r.Count != 2 {
			t.Fatalf("within TTL: count %d", r.Count)
		}
		env.wait(11 * env.unit) // silence longer than TTL forgets it
		r, _ = env.store.Take(ctx, env.ns, k, a, lim)
		if r.Count != 1 {
			t.Fatalf("after TTL: count %d", r.Count)
		}
		st, err := env.store.Inspect(ctx, env.ns, k, lim)
		if err != nil || st.Count != 1 || st.CountTTL <= 0 || st.CountTTL > lim.TTL || st.Ban != nil {
			t.Fatalf("inspect: %+v %v", st, err)
		}
	})
}

func TestStoreEscalation(t *testing.T) {
	eachStore(t, func(t *testing.T, env storeEnv) {
		ctx, lim := t.Context(), suiteLimits(env.unit)
		lim.BanDuration, lim.MaxBanDuration = 5*env.unit, 12*env.unit
		k, a := hostKey("198.51.100.4")
		offend := func() Result {
			t.Helper()
			for range 10 {
				r, err := env.store.Take(ctx, env.ns, k, a, lim)
				if err != nil {
					t.Fatal(err)
				}
				if r.NewBan {
					return r
				}
			}
			t.Fatal("no ban")
			return Result{}
		}
		for i, want := range []time.Duration{5, 10, 12} { // ×2, then the cap
			r := offend()
			if r.BanLeft != want*env.unit || r.Ban.Offense != i+1 {
				t.Fatalf("ban %d: left %v offense %d, want %v", i+1, r.BanLeft, r.Ban.Offense, want*env.unit)
			}
			env.wait(want*env.unit + env.unit) // the ban expires by itself
			if r, _ := env.store.Take(ctx, env.ns, k, a, lim); r.Banned || r.Count != 1 {
				t.Fatalf("after ban %d: %+v", i+1, r)
			}
		}
		st, _ := env.store.Inspect(ctx, env.ns, k, lim)
		if st.Offenses != 3 {
			t.Fatalf("offenses %d", st.Offenses)
		}
	})
}

func TestStoreManualBans(t *testing.T) {
	eachStore(t, func(t *testing.T, env storeEnv) {
		ctx, lim := t.Context(), suiteLimits(env.unit)
		k, a := hostKey("203.0.113.7")
		rng := Key{Prefix: netip.MustParsePrefix("198.51.100.0/24")}
		consumer := Key{Name: "cus_alpha"}
		if _, err := env.store.AddBan(ctx, env.ns, Ban{Key: k, Reason: "abuse", Source: SourceManual, By: "ops@host"}, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := env.store.AddBan(ctx, env.ns, Ban{Key: rng, Range: true, Reason: "scanner", Source: SourceManual, By: "ops"}, 30*env.unit); err != nil {
			t.Fatal(err)
		}
		if _, err := env.store.AddBan(ctx, env.ns, Ban{Key: consumer, Reason: "fraud", Source: SourceManual}, 30*env.unit); err != nil {
			t.Fatal(err)
		}
		r, _ := env.store.Take(ctx, env.ns, k, a, lim)
		if !r.Banned || !r.Ban.Permanent() || r.BanLeft != 0 || r.Ban.Reason != "abuse" || r.Ban.By != "ops@host" {
			t.Fatalf("permanent ban: %+v %+v", r, r.Ban)
		}
		inside, ia := hostKey("198.51.100.77")
		r, _ = env.store.Take(ctx, env.ns, inside, ia, lim)
		if !r.Banned || r.Ban.Key != rng || !r.Ban.Range || r.BanLeft <= 0 || r.BanLeft > 30*env.unit {
			t.Fatalf("range ban: %+v %+v", r, r.Ban)
		}
		outside, oa := hostKey("198.51.101.77")
		if r, _ = env.store.Take(ctx, env.ns, outside, oa, lim); r.Banned {
			t.Fatal("range ban reached outside its range")
		}
		if r, _ = env.store.Take(ctx, env.ns, consumer, netip.Addr{}, lim); !r.Banned || r.Ban.Reason != "fraud" {
			t.Fatalf("consumer ban: %+v", r)
		}
		bans, err := env.store.Bans(ctx, env.ns)
		if err != nil || len(bans) != 3 {
			t.Fatalf("Bans: %+v %v", bans, err)
		}
		if ranges, err := env.store.RangeBans(ctx, env.ns); err != nil || len(ranges) != 1 || ranges[0].Key != rng || !ranges[0].Range || ranges[0].Reason != "scanner" {
			t.Fatalf("RangeBans: %+v %v", ranges, err)
		}
		SortBans(bans)
		if bans[0].Key != rng && bans[0].Key != consumer || bans[2].Key != k || !bans[2].Permanent() {
			t.Fatalf("Bans order: %+v", bans)
		}
		for _, lift := range []Key{k, rng, consumer} {
			b, ok, err := env.store.Lift(ctx, env.ns, lift)
			if err != nil || !ok || b.Key != lift {
				t.Fatalf("Lift %s: %+v %v %v", lift, b, ok, err)
			}
		}
		if _, ok, err := env.store.Lift(ctx, env.ns, k); ok || err != nil {
			t.Fatalf("second lift: %v %v", ok, err)
		}
		for _, c := range []struct {
			k Key
			a netip.Addr
		}{{k, a}, {inside, ia}, {consumer, netip.Addr{}}} {
			if r, _ := env.store.Take(ctx, env.ns, c.k, c.a, lim); r.Banned {
				t.Fatalf("%s still banned after lift", c.k)
			}
		}
		if bans, _ := env.store.Bans(ctx, env.ns); len(bans) != 0 {
			t.Fatalf("bans after lifting all: %+v", bans)
		}
	})
}

func TestStoreNamespaces(t *testing.T) {
	eachStore(t, func(t *testing.T, env storeEnv) {
		ctx, lim := t.Context(), suiteLimits(env.unit)
		k, a := hostKey("192.0.2.9")
		for range 3 {
			env.store.Take(ctx, env.ns, k, a, lim)
		}
		if r, _ := env.store.Take(ctx, env.ns+"other:", k, a, lim); r.Count != 1 {
			t.Fatalf("other namespace sees count %d", r.Count)
		}
		env.store.AddBan(ctx, env.ns, Ban{Key: k, Source: SourceManual}, 0)
		if bans, _ := env.store.Bans(ctx, env.ns+"other:"); len(bans) != 0 {
			t.Fatalf("other namespace lists %+v", bans)
		}
	})
}

// 300 concurrent takes on one key: every count from 1 to BanLimit+1 is
// handed out exactly once, one ban is written, the rest are refused by it.
func TestStoreConcurrentExactness(t *testing.T) {
	eachStore(t, func(t *testing.T, env storeEnv) {
		ctx, lim := t.Context(), suiteLimits(env.unit)
		lim.BanLimit = 250
		k, a := hostKey("192.0.2.200")
		var mu sync.Mutex
		seen := map[int64]int{}
		newBans, banned, errs := 0, 0, 0
		var wg sync.WaitGroup
		for range 300 {
			wg.Go(func() {
				r, err := env.store.Take(ctx, env.ns, k, a, lim)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					errs++
				case r.NewBan:
					newBans++
					seen[r.Count]++
				case r.Banned:
					banned++
				default:
					seen[r.Count]++
				}
			})
		}
		wg.Wait()
		if errs != 0 || newBans != 1 || banned != 49 || len(seen) != 251 {
			t.Fatalf("errors %d, new bans %d, banned %d, distinct counts %d", errs, newBans, banned, len(seen))
		}
		for n := int64(1); n <= 251; n++ {
			if seen[n] != 1 {
				t.Fatalf("count %d handed out %d times", n, seen[n])
			}
		}
	})
}

// Listing finds every ban; on a cluster the 30 keys spread over every
// master, so this fails unless each master is scanned.
func TestStoreListsEveryBan(t *testing.T) {
	eachStore(t, func(t *testing.T, env storeEnv) {
		ctx := t.Context()
		want := map[Key]bool{}
		for i := range 30 {
			k, _ := hostKey(fmt.Sprintf("192.0.2.%d", i+1))
			if _, err := env.store.AddBan(ctx, env.ns, Ban{Key: k, Source: SourceManual, Reason: "list"}, time.Hour); err != nil {
				t.Fatal(err)
			}
			want[k] = true
		}
		bans, err := env.store.Bans(ctx, env.ns)
		if err != nil || len(bans) != 30 {
			t.Fatalf("listed %d bans, %v; want 30", len(bans), err)
		}
		for _, b := range bans {
			if !want[b.Key] || b.Reason != "list" {
				t.Fatalf("unexpected ban %+v", b)
			}
			delete(want, b.Key)
		}
	})
}
