package protect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// countingHook counts the commands a go-redis client sends: one Process
// call is one round trip, a pipeline is one round trip of several.
type countingHook struct {
	trips atomic.Int64
	mu    sync.Mutex
	names []string
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		h.mu.Lock()
		h.names = append(h.names, cmd.Name())
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		return next(ctx, cmds)
	}
}

// take returns and resets what was counted.
func (h *countingHook) take() (int64, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	names := h.names
	h.names = nil
	return h.trips.Swap(0), names
}

// redisTarget is a Redis the protector tests run against: addr starts or
// finds it, and dial makes one more client of it.
type redisTarget struct {
	name string
	addr func(t *testing.T) string
}

var redisTargets = []redisTarget{
	{"miniredis", func(t *testing.T) string { return miniredis.RunT(t).Addr() }},
	{"redis-server", func(t *testing.T) string { return realRedisAddr(t) }},
	{"redis-cluster", func(t *testing.T) string { return "cluster:" + strings.Join(clusterAddrs(t), ",") }},
}

// dial returns a new client of the Redis at addr; "cluster:a,b,c" is a
// Redis Cluster.
func dial(addr string) redis.UniversalClient {
	if nodes, ok := strings.CutPrefix(addr, "cluster:"); ok {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(nodes, ","), ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second})
	}
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second})
}

// instance is one service instance: its own client, store and protector.
type instance struct {
	p     *Protector
	store *RedisStore
	hook  *countingHook
	clock *fakeClock
}

// newInstance starts one instance on the Redis at addr.
func newInstance(t *testing.T, addr, ns string, cfg Config, opt RedisOptions) *instance {
	t.Helper()
	c := dial(addr)
	hook := &countingHook{}
	c.AddHook(hook)
	clk := newFakeClock()
	if opt.Clock == nil {
		opt.Clock = clk.Now
	}
	if opt.Logger == nil {
		opt.Logger = discardLogger()
	}
	s := NewRedisStore(c, opt)
	cfg.Store, cfg.Namespace = s, ns
	if cfg.BanNamespace == "" {
		cfg.BanNamespace = ns // the test's own ban list, apart from every other test's
	}
	if cfg.Clock == nil {
		cfg.Clock = clk.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = discardLogger()
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// No publishing in the background, which tests that count round trips
	// would see (TestServicePublishesLimits turns it back on).
	p.publishing.Store(publishDone)
	t.Cleanup(func() { p.Close(); s.Close(); c.Close() })
	return &instance{p: p, store: s, hook: hook, clock: clk}
}

// allKeys returns the keys matching pattern on every master.
func allKeys(ctx context.Context, c redis.UniversalClient, pattern string) ([]string, error) {
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

// testNamespace gives each test its own keys on a shared server.
func testNamespace(t *testing.T, addr string) string {
	t.Helper()
	c := dial(addr)
	t.Cleanup(func() { c.Close() })
	return uniqueNamespace(t, c)
}

// Three instances, each with its own client, share one Redis: 300
// requests round robin give exactly 100 served, 150 limited, 50 banned,
// and exactly one ban record.
func TestRedisThreeInstancesExact(t *testing.T) {
	for _, target := range redisTargets {
		for _, concurrent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/concurrent=%v", target.name, concurrent), func(t *testing.T) {
				addr := target.addr(t)
				ns := testNamespace(t, addr)
				var inst [3]*instance
				for i := range inst {
					// Exactness is the subject here, not deadlines: miniredis under -race
					// is slow enough to miss the default 100ms.
					inst[i] = newInstance(t, addr, ns, Config{MaxRequests: 100, BanLimit: 250, StoreTimeout: 10 * time.Second}, RedisOptions{RangeRefresh: -1})
				}
				client := netip.MustParseAddr("203.0.113.7")
				got := sendAll(t, 300, concurrent, func(i int) (Decision, error) { return inst[i%3].p.VerifyAddr(t.Context(), client) })
				if got[Allowed] != 100 || got[Limited] != 150 || got[Banned] != 50 || len(got) != 3 {
					t.Fatalf("got %v; want allowed 100, limited 150, banned 50", got)
				}
				bans, err := inst[0].p.Bans(t.Context(), BanFilter{})
				if err != nil || len(bans) != 1 || bans[0].Key.String() != "203.0.113.7" || bans[0].Offense != 1 {
					t.Fatalf("bans: %+v %v", bans, err)
				}
			})
		}
	}
}

// One round trip per counted request, the script alone; none for safe
// networks and none for a ban this instance has already seen.
func TestRedisRoundTrips(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.name, func(t *testing.T) {
			addr := target.addr(t)
			in := newInstance(t, addr, testNamespace(t, addr), Config{MaxRequests: 1000, BanLimit: 60, SafeNetworks: []string{"10.0.0.0/8"}}, RedisOptions{RangeRefresh: -1})
			ctx := t.Context()
			a := netip.MustParseAddr("198.51.100.1")
			in.p.VerifyAddr(ctx, a) // loads the script and the range bans once
			in.hook.take()
			for i := 1; i <= 50; i++ {
				in.p.VerifyAddr(ctx, a)
				if n, names := in.hook.take(); n != 1 || names[0] != "evalsha" {
					t.Fatalf("request %d: %d round trips %v", i, n, names)
				}
			}
			// A Check decides through the same script: one round trip, nothing counted.
			r := request(netip.AddrPortFrom(a, 5555).String())
			for i := 1; i <= 3; i++ {
				d, err := in.p.Check(ctx, r)
				if n, names := in.hook.take(); n != 1 || len(names) != 1 || names[0] != "evalsha" {
					t.Fatalf("Check %d: %d round trips %v, want 1 evalsha", i, n, names)
				}
				if err != nil || d.Err != nil || d.Status != Allowed || d.Count != 51 {
					t.Fatalf("Check %d = %v count %d, %v %v; want allowed with count 51", i, d.Status, d.Count, err, d.Err)
				}
			}
			for range 50 {
				if d, _ := in.p.VerifyAddr(ctx, netip.MustParseAddr("10.1.2.3")); d.Status != Safe {
					t.Fatalf("safe: %v", d.Status)
				}
			}
			if n, names := in.hook.take(); n != 0 {
				t.Fatalf("safe networks: %d round trips %v", n, names)
			}
			for { // cross BanLimit: the banning request is one round trip
				d, _ := in.p.VerifyAddr(ctx, a)
				if n, _ := in.hook.take(); n != 1 {
					t.Fatalf("%d round trips", n)
				}
				if d.Status == Banned {
					break
				}
			}
			for range 100 {
				if d, _ := in.p.VerifyAddr(ctx, a); d.Status != Banned || d.RetryAfter != time.Hour {
					t.Fatalf("cached ban: %v %v", d.Status, d.RetryAfter)
				}
			}
			if n, names := in.hook.take(); n != 0 {
				t.Fatalf("a cached ban cost %d round trips %v", n, names)
			}
			if d, _ := in.p.Check(ctx, r); d.Status != Banned {
				t.Fatalf("Check of a cached ban = %v, want banned", d.Status)
			}
			if n, names := in.hook.take(); n != 0 {
				t.Fatalf("Check of a cached ban: %d round trips %v, want 0", n, names)
			}
			// The cache is bounded in age: after BanCacheTTL the store is asked again.
			in.clock.Advance(600 * time.Millisecond)
			if d, _ := in.p.VerifyAddr(ctx, a); d.Status != Banned {
				t.Fatal("ban forgotten")
			}
			if n, _ := in.hook.take(); n != 1 {
				t.Fatalf("after the cache age: %d round trips", n)
			}
		})
	}
}

// A request that counts a consumer (KeyFunc) checks its address's ban
// first: two round trips, and none once this instance has seen that ban.
func TestRedisConsumerRoundTrips(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.name, func(t *testing.T) {
			addr := target.addr(t)
			in := newInstance(t, addr, testNamespace(t, addr), Config{
				KeyFunc: func(r *http.Request) (string, bool) { return "acme", true },
			}, RedisOptions{RangeRefresh: -1})
			ctx := t.Context()
			r := request("198.51.100.1:5555")
			in.p.Verify(ctx, r) // loads the script and the range bans once
			in.hook.take()
			for i := 1; i <= 3; i++ {
				d, _ := in.p.Verify(ctx, r)
				if n, names := in.hook.take(); n != 2 || names[0] != "evalsha" || names[1] != "evalsha" || d.Key.String() != "acme" {
					t.Fatalf("request %d: %d round trips %v, counted as %s; want 2 evalsha, counted as acme", i, n, names, d.Key)
				}
			}
			if _, err := in.p.Ban(ctx, "198.51.100.1", BanOptions{}); err != nil {
				t.Fatal(err)
			}
			in.p.Verify(ctx, r) // sees the ban
			in.hook.take()
			for range 10 {
				if d, _ := in.p.Verify(ctx, r); d.Status != Banned || d.Key.String() != "198.51.100.1" {
					t.Fatalf("a banned address with a consumer = %v on %s, want banned on the address", d.Status, d.Key)
				}
			}
			if n, names := in.hook.take(); n != 0 {
				t.Fatalf("a cached address ban cost %d round trips %v", n, names)
			}
		})
	}
}

// A lift or a new range ban reaches every instance: a lifted key within
// BanCacheTTL, a range within one refresh.
func TestRedisBansReachEveryInstance(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.name, func(t *testing.T) {
			addr := target.addr(t)
			ns := testNamespace(t, addr)
			a := newInstance(t, addr, ns, Config{MaxRequests: 2, BanLimit: 3}, RedisOptions{RangeRefresh: -1})
			b := newInstance(t, addr, ns, Config{MaxRequests: 2, BanLimit: 3}, RedisOptions{RangeRefresh: -1})
			ctx := t.Context()
			client := netip.MustParseAddr("192.0.2.50")
			for range 4 {
				b.p.VerifyAddr(ctx, client)
			}
			if d, _ := b.p.VerifyAddr(ctx, client); d.Status != Banned {
				t.Fatalf("b: %v", d.Status)
			}
			if d, _ := a.p.VerifyAddr(ctx, client); d.Status != Banned {
				t.Fatalf("a sees the ban b wrote: %v", d.Status)
			}
			if lifted, err := a.p.Lift(ctx, "192.0.2.50", "test"); err != nil || len(lifted) != 1 {
				t.Fatalf("lift: %v %v", lifted, err)
			}
			if d, _ := a.p.VerifyAddr(ctx, client); d.Status != Allowed || d.Count != 1 {
				t.Fatalf("a after its own lift: %v %d", d.Status, d.Count)
			}
			b.clock.Advance(500 * time.Millisecond) // b's cached answer ages out
			if d, _ := b.p.VerifyAddr(ctx, client); d.Status != Allowed {
				t.Fatalf("b after the cache age: %v", d.Status)
			}
			// A range ban from a, seen by b after one refresh.
			if _, err := a.p.Ban(ctx, "198.51.100.0/24", BanOptions{For: time.Hour, Reason: "scan"}); err != nil {
				t.Fatal(err)
			}
			inside := netip.MustParseAddr("198.51.100.9")
			if d, _ := a.p.VerifyAddr(ctx, inside); d.Status != Banned {
				t.Fatalf("a, inside its range ban: %v", d.Status)
			}
			if err := b.store.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if d, _ := b.p.VerifyAddr(ctx, inside); d.Status != Banned || d.RetryAfter <= 59*time.Minute {
				t.Fatalf("b after refresh: %v %v", d.Status, d.RetryAfter)
			}
			a.p.Lift(ctx, "198.51.100.0/24", "test")
			b.store.Refresh(ctx)
			if d, _ := b.p.VerifyAddr(ctx, inside); d.Status != Allowed {
				t.Fatalf("b after the range lift: %v", d.Status)
			}
		})
	}
}

// The background refresher really runs: a range ban from one instance
// reaches another with no call from the test.
func TestRedisRangeRefresher(t *testing.T) {
	addr := miniredis.RunT(t).Addr()
	a := newInstance(t, addr, "protect:", Config{}, RedisOptions{RangeRefresh: -1})
	b := newInstance(t, addr, "protect:", Config{}, RedisOptions{RangeRefresh: 20 * time.Millisecond, Clock: time.Now})
	inside := netip.MustParseAddr("198.51.100.9")
	b.p.VerifyAddr(t.Context(), inside) // b starts using the namespace
	a.p.Ban(t.Context(), "198.51.100.0/24", BanOptions{For: time.Hour})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if d, _ := b.p.VerifyAddr(t.Context(), inside); d.Status == Banned {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the range ban never reached the other instance")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A consumer key that looks like a secret never reaches a key name.
func TestRedisSecretNeverInKeyNames(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.name, func(t *testing.T) {
			addr := target.addr(t)
			ns := testNamespace(t, addr)
			in := newInstance(t, addr, ns, Config{MaxRequests: 1, BanLimit: 2}, RedisOptions{RangeRefresh: -1})
			const secret = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
			for range 4 { // counter, then ban and offense keys
				in.p.VerifyKey(t.Context(), secret)
			}
			keys, err := allKeys(t.Context(), in.store.client, globEscape(ns)+"*")
			keys = withoutPublished(keys, ns)
			if err != nil || len(keys) != 3 {
				t.Fatalf("keys %v %v; want a ban, an offense history and the ban index", keys, err)
			}
			for _, k := range keys {
				if strings.HasSuffix(k, "bans") {
					continue // the ban index, whose members are checked below
				}
				if strings.Contains(k, secret) || strings.Contains(k, "4eC39") || !strings.Contains(k, "{~") {
					t.Fatalf("key name %q carries the secret", k)
				}
			}
			// The values too: the ban record (a string) and the offense
			// history (a sorted set).
			c := in.store.client
			for _, k := range keys {
				var v any
				typ, err := c.Type(t.Context(), k).Result()
				switch {
				case err != nil:
					t.Fatalf("TYPE %q: %v", k, err)
				case typ == "string" && strings.HasSuffix(k, "}:b"):
					v, err = c.Get(t.Context(), k).Result()
				case typ == "zset" && (strings.HasSuffix(k, "}:o") || strings.HasSuffix(k, "bans")):
					v, err = c.ZRange(t.Context(), k, 0, -1).Result()
				default:
					t.Fatalf("key %q is a %s; want the ban string ...:b, the offense set ...:o or the ban index", k, typ)
				}
				if err != nil || fmt.Sprint(v) == "" || fmt.Sprint(v) == "[]" {
					t.Fatalf("record %q = %v, %v; want one", k, v, err)
				}
				if strings.Contains(fmt.Sprint(v), secret) || strings.Contains(fmt.Sprint(v), "4eC39") {
					t.Fatalf("record %q carries the secret: %v", k, v)
				}
			}
		})
	}
}

func TestRedisBadInput(t *testing.T) {
	for _, raw := range []string{"http://example", "redis://:hunter2@127.0.0.1:notaport", "redis://127.0.0.1:6379/notadb", "::"} {
		_, err := DialRedis(raw, RedisOptions{})
		if err == nil {
			t.Fatalf("DialRedis(%q) accepted", raw)
		}
		if !strings.Contains(err.Error(), "redis URL") || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("DialRedis(%q): %v", raw, err)
		}
	}
	if _, err := New(Config{RedisURL: "redis://127.0.0.1:6379/x"}); !errors.Is(err, ErrConfig) {
		t.Fatalf("New with a bad RedisURL: %v", err)
	}
	for _, target := range redisTargets {
		t.Run(target.name, func(t *testing.T) {
			addr := target.addr(t)
			ns := testNamespace(t, addr)
			for _, policy := range []FailurePolicy{FailOpen, FailLocal, FailClosed} {
				in := newInstance(t, addr, ns, Config{OnStoreError: policy}, RedisOptions{RangeRefresh: -1})
				c := in.store.client
				// Foreign values where protect keeps its counter and ban
				// (a ban is a string record: a hash there is foreign), and
				// a string at a ban's key that is no ban record.
				c.HSet(t.Context(), ns+"{192.0.2.1}:c", "x", "y")
				c.HSet(t.Context(), ns+"{192.0.2.2}:b", "x", "y")
				c.Set(t.Context(), ns+"{192.0.2.3}:b", "not a ban record", 0)
				for _, tt := range []struct{ a, wantErr string }{{"192.0.2.1", "WRONGTYPE"}, {"192.0.2.2", "WRONGTYPE"}, {"192.0.2.3", "malformed ban record"}} {
					a, wantErr := tt.a, tt.wantErr
					d, err := in.p.VerifyAddr(t.Context(), netip.MustParseAddr(a))
					if err != nil || d.Err == nil || !strings.Contains(d.Err.Error(), wantErr) {
						t.Fatalf("%v: VerifyAddr(%s) = %v, Err %v; want Err saying %s", policy, a, err, d.Err, wantErr)
					}
					want := map[FailurePolicy]Status{FailOpen: Allowed, FailLocal: Allowed, FailClosed: Unavailable}[policy]
					w := httptest.NewRecorder()
					d.WriteResponse(w)
					if d.Status != want || strings.Contains(w.Body.String(), wantErr) || strings.Contains(w.Body.String(), "not a ban record") {
						t.Fatalf("%v: VerifyAddr(%s) = %v, body %s; want %v and no store error in the body", policy, a, d.Status, w.Body, want)
					}
				}
			}
		})
	}
}

// startRedisServer runs a redis-server of the test's own, which the test
// may stop and resume. It is skipped where the binary is missing, except
// under CI.
func startRedisServer(t *testing.T) (addr string, pause, resume func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		realRedisAddr(t) // fails under CI, skips elsewhere
		t.Skip("redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for i := 0; c.Ping(context.Background()).Err() != nil; i++ {
		if i == 100 {
			t.Fatalf("redis-server on %s did not start", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return addr,
		func() { cmd.Process.Signal(syscall.SIGSTOP) },
		func() { cmd.Process.Signal(syscall.SIGCONT) }
}

// countingHandler counts log records by message.
type countingHandler struct {
	mu   sync.Mutex
	msgs map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs[r.Message]++
	h.mu.Unlock()
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// Redis stopped mid-run: no request waits much past StoreTimeout, the
// circuit breaker then stops calling Redis at all, every policy does what
// it says, and all recover by themselves when Redis is back.
func TestRedisOutage(t *testing.T) {
	const timeout = 100 * time.Millisecond
	for _, policy := range []FailurePolicy{FailOpen, FailClosed, FailLocal} {
		t.Run(policy.String(), func(t *testing.T) {
			addr, pause, resume := startRedisServer(t)
			logs := &countingHandler{msgs: map[string]int{}}
			in := newInstance(t, addr, "protect:", Config{MaxRequests: 5, StoreTimeout: timeout, OnStoreError: policy, Logger: slog.New(logs)}, RedisOptions{RangeRefresh: -1})
			ctx := t.Context()
			client := netip.MustParseAddr("192.0.2.77")
			if d, _ := in.p.VerifyAddr(ctx, client); d.Status != Allowed || d.Err != nil {
				t.Fatalf("before the outage: %v %v", d.Status, d.Err)
			}
			pause()
			in.hook.take()
			var ds []Decision
			for i := range 10 {
				start := time.Now()
				d, err := in.p.VerifyAddr(ctx, client)
				// A bound, not a benchmark: a stalled store must cost one
				// StoreTimeout, never go-redis' 3s read timeout.
				if took := time.Since(start); took > timeout+400*time.Millisecond {
					t.Fatalf("request %d waited %v with StoreTimeout %v", i, took, timeout)
				}
				if err != nil || d.Err == nil {
					t.Fatalf("request %d: %v %v", i, err, d.Err)
				}
				ds = append(ds, d)
			}
			// Three failures open the circuit; the next seven never reach
			// Redis. (HELLO is go-redis setting up a replacement connection.)
			_, names := in.hook.take()
			if n := strings.Count(strings.Join(names, " "), "evalsha"); n != breakerThreshold {
				t.Fatalf("%d calls reached the stalled Redis %v; want %d", n, names, breakerThreshold)
			}
			if !errors.Is(ds[9].Err, ErrStoreUnavailable) {
				t.Fatalf("with the circuit open: %v", ds[9].Err)
			}
			switch policy {
			case FailOpen:
				for i, d := range ds {
					if d.Refused() {
						t.Fatalf("fail open, request %d: %v", i, d.Status)
					}
				}
			case FailClosed:
				w := httptest.NewRecorder()
				ds[9].WriteResponse(w)
				if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || strings.Contains(w.Body.String(), "timeout") {
					t.Fatalf("fail closed: %d %v %s", w.Code, w.Header(), w.Body)
				}
			case FailLocal:
				var got []Status
				for _, d := range ds {
					got = append(got, d.Status)
				}
				// The local store starts from zero: 5 allowed, then limited.
				if fmt.Sprint(got) != "[allowed allowed allowed allowed allowed limited limited limited limited limited]" {
					t.Fatalf("fail local: %v", got)
				}
			}
			resume()
			in.clock.Advance(breakerCooldown) // the breaker lets one probe through
			var d Decision
			for range 50 { // Redis may still be catching up on the stalled connections
				d, _ = in.p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.78"))
				if d.Err == nil {
					break
				}
				in.clock.Advance(breakerCooldown)
				time.Sleep(20 * time.Millisecond)
			}
			if d.Err != nil || d.Status != Allowed || d.Count != 1 {
				t.Fatalf("after Redis came back: %v %v", d.Status, d.Err)
			}
			in.hook.take()
			in.p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.78"))
			if n, _ := in.hook.take(); n != 1 {
				t.Fatalf("after recovery %d round trips", n)
			}
			logs.mu.Lock()
			defer logs.mu.Unlock()
			if logs.msgs["protect: store failing; circuit open"] != 1 || logs.msgs["protect: store recovered"] != 1 {
				t.Fatalf("state changes logged: %v", logs.msgs)
			}
		})
	}
}

// Range bans are listed from their one hash, never by scanning keys, and
// a store that does not serve a namespace (protectctl) writes a range ban
// in one script without loading a local copy it would never use (then
// scans for the counters inside it, to reset them).
func TestRedisRangeBansCost(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.name, func(t *testing.T) {
			addr := target.addr(t)
			in := newInstance(t, addr, testNamespace(t, addr), Config{}, RedisOptions{RangeRefresh: -1})
			ctx := t.Context()
			// The first call also opens a connection and loads the script.
			in.p.Ban(ctx, "203.0.113.0/24", BanOptions{For: time.Hour})
			in.hook.take()
			if _, err := in.p.Ban(ctx, "198.51.100.0/24", BanOptions{For: time.Hour}); err != nil {
				t.Fatal(err)
			}
			// One script writes it; then the counters inside it are reset,
			// found by SCAN on each master (none here: nothing to delete).
			if n, names := in.hook.take(); n < 1 || names[0] != "evalsha" || strings.Trim(strings.ReplaceAll(strings.Join(names[1:], " "), "scan", ""), " ") != "" {
				t.Fatalf("a range ban from a store outside the namespace: %d round trips %v, want evalsha, then scans", n, names)
			}
			in.p.Ban(ctx, "192.0.2.1", BanOptions{}) // a key ban, which listing ranges must not read
			// Range bans are written by the ban script and listed by the
			// ranges script: the first listing also loads that one.
			in.p.Bans(ctx, BanFilter{RangesOnly: true})
			in.hook.take()
			ranges, err := in.p.Bans(ctx, BanFilter{RangesOnly: true})
			if n, names := in.hook.take(); n != 1 || strings.Contains(strings.Join(names, " "), "scan") {
				t.Fatalf("Bans(RangesOnly): %d round trips %v, want 1 and no scan", n, names)
			}
			if err != nil || len(ranges) != 2 || ranges[0].Key.String() != "198.51.100.0/24" && ranges[1].Key.String() != "198.51.100.0/24" {
				t.Fatalf("Bans(RangesOnly) = %+v, %v; want the two range bans", ranges, err)
			}
		})
	}
}

// withoutPublished drops the published limits of namespace ns from keys:
// a protector writes them in the background once it has counted, so a
// test that lists keys cannot tell whether they are there yet.
func withoutPublished(keys []string, ns string) []string {
	return slices.DeleteFunc(keys, func(k string) bool { return k == ns+"limits" })
}
