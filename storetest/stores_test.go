package storetest_test

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/internal/testclock"
	"github.com/httpprotect/protect/redisstore"
	"github.com/httpprotect/protect/store"
	"github.com/httpprotect/protect/storetest"
)

// protect's own stores, through the suite: memory and miniredis on a fake
// clock (RunEnv); the memory store, and the memory store and miniredis
// behind a wrapper that hides every optional capability, on real time
// (Run, as a third party runs it); a real redis-server
// (PROTECT_REDIS_ADDR) and a real Redis Cluster
// (PROTECT_REDIS_CLUSTER_ADDRS) on real time.

// capabilities names the optional interfaces s and its space of sc
// implement.
func capabilities(t *testing.T, s store.Store) []string {
	t.Helper()
	sc := store.Scope{Namespace: "capabilities:", Limits: store.Limits{TTL: time.Second, BanFactor: 1}}
	sp, err := s.Space(sc)
	if err != nil {
		t.Fatalf("Space(%+v) = %v", sc, err)
	}
	var has []string
	for name, ok := range map[string]bool{
		"CircuitStore": is[store.CircuitStore](s), "LocalSpace": is[store.LocalSpace](sp),
		"DeadlineSpace": is[store.DeadlineSpace](sp), "BanHolder": is[store.BanHolder](sp),
		"BanPager": is[store.BanPager](sp), "RangeBanCounter": is[store.RangeBanCounter](sp),
		"Journal": is[store.Journal](sp),
	} {
		if ok {
			has = append(has, name)
		}
	}
	slices.Sort(has)
	return has
}

func is[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

// hidden returns plain{s}, failing the test unless s has a capability
// that plain hides, and plain{s} none.
func hidden(t *testing.T, s store.Store) store.Store {
	t.Helper()
	if got := capabilities(t, s); len(got) == 0 {
		t.Fatalf("capabilities(%T) = none, want some for plain to hide", s)
	}
	p := plain{s}
	if got := capabilities(t, p); len(got) != 0 {
		t.Fatalf("capabilities(plain{%T}) = %v, want none", s, got)
	}
	return p
}

// newMemory is a memory store on the real clock, closed when t ends.
func newMemory(t *testing.T) *protect.MemoryStore {
	s := protect.NewMemoryStore(protect.MemoryOptions{})
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMemoryStoreRealTime(t *testing.T) {
	t.Parallel() // the suite sleeps on real time
	storetest.Run(t, func(t *testing.T) store.Store { return newMemory(t) })
}

func TestPlainMemoryStore(t *testing.T) {
	t.Parallel() // the suite sleeps on real time
	storetest.Run(t, func(t *testing.T) store.Store { return hidden(t, newMemory(t)) })
}

// TestPlainMiniredis runs the suite on real time on a redisstore.Store on
// miniredis: its TIME is the real time unless SetTime is called, and
// ClockTTL makes its keys expire by that clock (without it a TTL only
// goes down on FastForward, and the suite's expiry tests fail).
func TestPlainMiniredis(t *testing.T) {
	t.Parallel() // the suite sleeps on real time
	storetest.Run(t, func(t *testing.T) store.Store {
		m := miniredis.RunT(t)
		m.ClockTTL(true)
		c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		s := redisstore.New(c, redisstore.Options{RangeRefresh: -1, Logger: discard})
		t.Cleanup(func() { s.Close() })
		return hidden(t, s)
	})
}

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
		opt := redisstore.Options{Clock: clk.Now, RangeRefresh: -1, Logger: discard}
		s := redisstore.New(c, opt)
		t.Cleanup(func() { s.Close() })
		reopen := func(t *testing.T) store.Store { // a restart of the service, not of Redis
			s.Close()
			s = redisstore.New(c, opt)
			return s
		}
		return storetest.Env{Store: s, Now: clk.Now, Reopen: reopen, Wait: func(d time.Duration) {
			clk.Advance(d)
			m.SetTime(clk.Now())
			m.FastForward(d)
		}}
	})
}

func TestRedisServer(t *testing.T) {
	addr := redistest.RealAddr(t)
	storetest.RunEnv(t, func(t *testing.T) storetest.Env { return realEnv(t, addr) })
}

func TestRedisCluster(t *testing.T) {
	addr := "cluster:" + strings.Join(redistest.ClusterAddrs(t), ",")
	storetest.RunEnv(t, func(t *testing.T) storetest.Env { return realEnv(t, addr) })
}

// realEnv is a store on the real server at addr (redistest.Dial's form),
// in a namespace of the test's own, every key of which is deleted, on
// every master, when the test ends.
func realEnv(t *testing.T, addr string) storetest.Env {
	t.Helper()
	c := redistest.Dial(addr)
	t.Cleanup(func() { c.Close() })
	ns := redistest.Namespace(t, c) // cleanups run last first: the store, the keys, the client
	s := redisstore.New(c, redisstore.Options{RangeRefresh: -1, Logger: discard})
	t.Cleanup(func() { s.Close() })
	return storetest.Env{Store: s, Namespace: ns}
}

var discard = slog.New(slog.DiscardHandler)
