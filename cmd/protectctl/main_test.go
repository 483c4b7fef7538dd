package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/envconfig"
	"github.com/httpprotect/protect/redisstore"
	"github.com/redis/go-redis/v9"
)

// server is a Redis the operator's story runs against.
type server struct {
	addr string
	ns   string
	c    *redis.Client
}

// servers returns miniredis, and a real redis-server when
// PROTECT_REDIS_ADDR is set (under CI it must be).
func servers(t *testing.T) map[string]func(t *testing.T) server {
	t.Helper()
	out := map[string]func(t *testing.T) server{
		"miniredis": func(t *testing.T) server { return newServer(t, miniredis.RunT(t).Addr()) },
	}
	if addr := os.Getenv("PROTECT_REDIS_ADDR"); addr != "" {
		out["redis-server"] = func(t *testing.T) server { return newServer(t, addr) }
	} else if os.Getenv("CI") != "" {
		t.Fatal("CI is set but PROTECT_REDIS_ADDR is not")
	}
	return out
}

func newServer(t *testing.T, addr string) server {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	ns := fmt.Sprintf("ctl:%x:", rand.Uint64())
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := c.Keys(ctx, ns+"*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
		c.Close()
	})
	return server{addr: addr, ns: ns, c: c}
}

// fakeClock moves only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

// service is one instance of a protected service on the shared Redis.
type service struct {
	p     *protect.Protector
	store *redisstore.Store
	clock *fakeClock
}

func newService(t *testing.T, s server, cfg protect.Config) *service {
	t.Helper()
	clk := &fakeClock{t: time.Now()}
	c := redis.NewClient(&redis.Options{Addr: s.addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	store := redisstore.New(c, redisstore.Options{Clock: clk.Now, RangeRefresh: -1})
	cfg.Store, cfg.Namespace, cfg.BanNamespace, cfg.Clock = store, s.ns, s.ns, clk.Now
	cfg.Logger = slog.New(slog.DiscardHandler)
	p, err := protect.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); store.Close(); c.Close() })
	return &service{p: p, store: store, clock: clk}
}

// newEnvService is newService with the settings of the HTTP_PROTECT_*
// environment, as protectctl reads them.
func newEnvService(t *testing.T, s server) *service {
	t.Helper()
	cfg, err := envconfig.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	return newService(t, s, cfg)
}

func (sv *service) verify(t *testing.T, addr string) protect.Decision {
	t.Helper()
	d, err := sv.p.VerifyAddr(t.Context(), netip.MustParseAddr(addr))
	if err != nil || d.Err != nil {
		t.Fatalf("VerifyAddr(%s) = %v, Err %v; want no error", addr, err, d.Err)
	}
	return d
}

// ctl runs protectctl in-process against s and returns what it wrote.
func ctl(t *testing.T, s server, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	code = run(append([]string{"-redis", "redis://" + s.addr + "/0", "-namespace", s.ns}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func ctlJSON(t *testing.T, s server, v any, args ...string) {
	t.Helper()
	code, out, errs := ctl(t, s, append(args, "-json")...)
	if code != 0 {
		t.Fatalf("protectctl %v = exit %d, stderr %s; want exit 0", args, code, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("protectctl %v: json.Unmarshal(%q) = %v, want its -json record", args, out, err)
	}
}

// The operator's story: a service bans a client, protectctl lists it and
// lifts it, and the next request on every instance is served.
func TestBanListLift(t *testing.T) {
	for name, mk := range servers(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			one := newService(t, s, protect.Config{MaxRequests: 2, BanLimit: 3})
			two := newService(t, s, protect.Config{MaxRequests: 2, BanLimit: 3})
			for range 4 {
				one.verify(t, "203.0.113.7")
			}
			if d := two.verify(t, "203.0.113.7"); d.Status != protect.Banned {
				t.Fatalf("two.verify(203.0.113.7) = %v, want banned by instance one's ban", d.Status)
			}
			code, out, errs := ctl(t, s, "bans")
			if code != 0 || !strings.Contains(out, "203.0.113.7") || !strings.Contains(out, "ban limit of 3") || !strings.Contains(out, "  1h0m0s  ") {
				t.Fatalf("protectctl bans = exit %d\n%s%s\nwant exit 0 and the 1h ban of 203.0.113.7", code, out, errs)
			}
			var recs []admin.BanRecord
			ctlJSON(t, s, &recs, "bans")
			if len(recs) != 1 || recs[0].Key != "203.0.113.7" || recs[0].Source != "auto" || recs[0].Permanent ||
				recs[0].SecondsLeft == nil || *recs[0].SecondsLeft < 3590 || *recs[0].SecondsLeft > 3600 || recs[0].Offense != 1 {
				t.Fatalf("protectctl bans -json = %+v, want one automatic ban of 203.0.113.7 for about 1h, offense 1", recs)
			}
			code, out, errs = ctl(t, s, "lift", "-by", "alice@ops", "203.0.113.7")
			if code != 0 || !strings.Contains(out, "203.0.113.7") {
				t.Fatalf("protectctl lift 203.0.113.7 = exit %d\n%s%s\nwant exit 0 naming it", code, out, errs)
			}
			// Each instance may answer from its cached ban for BanCacheTTL;
			// then both serve, counting one shared stream from zero.
			for i, sv := range []*service{one, two} {
				sv.clock.Advance(500 * time.Millisecond)
				if d := sv.verify(t, "203.0.113.7"); d.Status != protect.Allowed || d.Count != int64(i+1) {
					t.Fatalf("instance %d: verify(203.0.113.7) after lift = %v count %d, want allowed, count %d", i+1, d.Status, d.Count, i+1)
				}
			}
			ctlJSON(t, s, &recs, "bans")
			if recs == nil || len(recs) != 0 {
				t.Fatalf("protectctl bans after lift = %#v, want an empty list", recs)
			}
			if _, out, _ := ctl(t, s, "bans", "-json"); strings.TrimSpace(out) != "[]" {
				t.Fatalf("protectctl bans -json with no bans = %q, want []", out)
			}
		})
	}
}

// An operator's range ban reaches every instance; lifting the CIDR lifts it.
func TestRangeBan(t *testing.T) {
	for name, mk := range servers(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			one := newService(t, s, protect.Config{})
			two := newService(t, s, protect.Config{})
			one.verify(t, "198.51.100.7") // both instances are running
			two.verify(t, "198.51.100.7")
			code, out, errs := ctl(t, s, "ban", "-for", "1h", "-reason", "scanner", "-by", "bob@ops", "198.51.100.0/24")
			if code != 0 || !strings.Contains(out, "198.51.100.0/24") || !strings.Contains(out, "bob@ops") {
				t.Fatalf("protectctl ban 198.51.100.0/24 = exit %d\n%s%s\nwant exit 0 naming it and bob@ops", code, out, errs)
			}
			for _, sv := range []*service{one, two} {
				if err := sv.store.Refresh(t.Context()); err != nil { // what RangeRefresh does every 500ms
					t.Fatal(err)
				}
				if d := sv.verify(t, "198.51.100.7"); d.Status != protect.Banned || d.RetryAfter <= 59*time.Minute {
					t.Fatalf("verify(198.51.100.7) inside the range = %v, retry after %v; want banned for about 1h", d.Status, d.RetryAfter)
				}
				if d := sv.verify(t, "198.51.101.7"); d.Status != protect.Allowed {
					t.Fatalf("verify(198.51.101.7) outside the range = %v, want allowed", d.Status)
				}
			}
			var in admin.Inspection
			ctlJSON(t, s, &in, "inspect", "198.51.100.7")
			if in.Key != "198.51.100.7" || len(in.RangeBans) != 1 || in.RangeBans[0].Key != "198.51.100.0/24" || in.RangeBans[0].Reason != "scanner" {
				t.Fatalf("protectctl inspect 198.51.100.7 = %+v, want the range ban 198.51.100.0/24 for scanner", in)
			}
			var recs []admin.BanRecord
			ctlJSON(t, s, &recs, "bans", "-within", "198.51.0.0/16", "-source", "manual")
			if len(recs) != 1 || !recs[0].Range || recs[0].By != "bob@ops" {
				t.Fatalf("protectctl bans -within 198.51.0.0/16 -source manual = %+v, want the range ban by bob@ops", recs)
			}
			ctlJSON(t, s, &recs, "bans", "-source", "auto")
			if len(recs) != 0 {
				t.Fatalf("protectctl bans -source auto = %+v, want none", recs)
			}
			if code, _, errs := ctl(t, s, "lift", "198.51.100.0/24"); code != 0 {
				t.Fatalf("protectctl lift 198.51.100.0/24 = exit %d %s, want 0", code, errs)
			}
			for _, sv := range []*service{one, two} {
				sv.store.Refresh(t.Context())
				if d := sv.verify(t, "198.51.100.7"); d.Status != protect.Allowed {
					t.Fatalf("verify(198.51.100.7) after lift = %v, want allowed", d.Status)
				}
			}
		})
	}
}

// An automatic ban on an IPv6 client is lifted by naming any address of
// its /64.
func TestLiftIPv6ByAnyAddress(t *testing.T) {
	for name, mk := range servers(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			sv := newService(t, s, protect.Config{MaxRequests: 1, BanLimit: 2})
			for i := range 3 {
				sv.verify(t, fmt.Sprintf("2001:db8:1:2::%x", i+1))
			}
			if d := sv.verify(t, "2001:db8:1:2:ffff::1"); d.Status != protect.Banned || d.Key.String() != "2001:db8:1:2::/64" {
				t.Fatalf("verify(2001:db8:1:2:ffff::1) = %v %q, want banned on 2001:db8:1:2::/64", d.Status, d.Key)
			}
			var recs []admin.BanRecord
			ctlJSON(t, s, &recs, "lift", "2001:db8:1:2::99")
			if len(recs) != 1 || recs[0].Key != "2001:db8:1:2::/64" {
				t.Fatalf("protectctl lift 2001:db8:1:2::99 = %+v, want the ban of 2001:db8:1:2::/64", recs)
			}
			sv.clock.Advance(500 * time.Millisecond)
			if d := sv.verify(t, "2001:db8:1:2::1"); d.Status != protect.Allowed {
				t.Fatalf("verify(2001:db8:1:2::1) after lift = %v, want allowed", d.Status)
			}
		})
	}
}

func TestUsageAndFailures(t *testing.T) {
	s := newServer(t, miniredis.RunT(t).Addr())
	tests := []struct {
		args []string
		code int
		says string
	}{
		{[]string{"lift"}, 2, "-all"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"ban", "garbage"}, 2, `"garbage"`},
		{[]string{"ban", "1.2.3.4/33"}, 2, `"1.2.3.4/33"`},
		{[]string{"lift", "not-an-address"}, 2, `"not-an-address"`},
		{[]string{"ban", "-for", "soon", "1.2.3.4"}, 2, "soon"},
		{[]string{"ban", "-for", "1h", "-permanent", "1.2.3.4"}, 2, "exclude"},
		{[]string{"ban"}, 2, "TARGET"},
		{[]string{"bans", "-source", "robots"}, 2, "robots"},
		{[]string{"inspect"}, 2, "one TARGET"},
		{[]string{"explain"}, 2, "-remote"},
		{[]string{"lift", "-all", "1.2.3.4"}, 2, "-all"},
		{[]string{"ban", "0.0.0.0/0"}, 2, "-force"},
		{[]string{"ban", "10.0.0.0/8", "::ffff:0:0/96"}, 2, `"::ffff:0:0/96" covers every IPv4 address`},
		{[]string{"ban", "2000::/3"}, 2, "1/8 of all IPv6 addresses"},
		{[]string{"lift", "0.0.0.0/0", "::/0"}, 2, "lift -all"},
		{[]string{"ban", "-for", "500ms", "1.2.3.4"}, 2, "at least 1s"},
		{[]string{"ban", "-for", "0s", "1.2.3.4"}, 2, "at least 1s"},
		{[]string{"ban", "-for", "36501d", "1.2.3.4"}, 2, "longer than 36500d"},
	}
	for _, tt := range tests {
		code, out, errs := ctl(t, s, tt.args...)
		if code != tt.code || !strings.Contains(errs, tt.says) || out != "" {
			t.Errorf("protectctl %v: exit %d, stdout %q, stderr %q; want exit %d saying %s", tt.args, code, out, errs, tt.code, tt.says)
		}
	}
	// Nothing was written by any of them.
	if keys, _ := s.c.Keys(t.Context(), "*").Result(); len(keys) != 0 {
		t.Fatalf("KEYS * after the usage errors = %v, want none", keys)
	}
	// -h explains every command, with an example, once, on stdout, and
	// succeeds; so do "protectctl -h" and "protectctl help".
	helps := [][]string{{"-h"}, {"help"}, {"-redis", "redis://x", "-h"}}
	for name := range commands {
		helps = append(helps, []string{name, "-h"}, []string{name, "-help"}, []string{name, "1.2.3.4", "-h"})
	}
	for _, args := range helps {
		var out, errs strings.Builder
		code := run(args, &out, &errs)
		want := "example:\n  protectctl " + args[0]
		if args[0] == "-h" || args[0] == "help" || args[0] == "-redis" {
			want = "usage: protectctl [-redis URL]"
		}
		if code != 0 || strings.Count(out.String(), want) != 1 || strings.Count(out.String(), "usage:") != 1 || errs.Len() != 0 {
			t.Errorf("protectctl %q: exit %d\nstdout %q\nstderr %q; want the usage once, on stdout", args, code, out.String(), errs.String())
		}
	}
	// A mistake prints the usage once, on stderr, after the error.
	for _, args := range [][]string{{"-bogus"}, {"ban", "-bogus", "1.2.3.4"}} {
		var out, errs strings.Builder
		if code := run(args, &out, &errs); code != 2 || out.Len() != 0 || strings.Count(errs.String(), "usage:") != 1 ||
			!strings.HasPrefix(errs.String(), "flag provided but not defined: -bogus\n") {
			t.Errorf("protectctl %q = exit %d\nstdout %q\nstderr %q; want exit 2, the error, then the usage once on stderr", args, code, out.String(), errs.String())
		}
	}
	// No store at all is a usage error that says how to give one.
	t.Setenv("HTTP_PROTECT_REDIS_URL", "")
	var errb strings.Builder
	if code := run([]string{"bans"}, &strings.Builder{}, &errb); code != 2 || !strings.Contains(errb.String(), "HTTP_PROTECT_REDIS_URL") {
		t.Fatalf("protectctl bans with no store = exit %d, stderr %s; want exit 2 naming HTTP_PROTECT_REDIS_URL", code, errb.String())
	}
	// A bad environment is named.
	t.Setenv("HTTP_PROTECT_IPV6_PREFIX", "sixty-four")
	errb.Reset()
	if code := run([]string{"-redis", "redis://" + s.addr, "bans"}, &strings.Builder{}, &errb); code != 2 || !strings.Contains(errb.String(), "HTTP_PROTECT_IPV6_PREFIX") {
		t.Fatalf("protectctl bans with HTTP_PROTECT_IPV6_PREFIX=sixty-four = exit %d, stderr %s; want exit 2 naming the variable", code, errb.String())
	}
}

// An unreachable store fails fast, with exit 1 and a message naming it.
func TestUnreachableStore(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:1", "127.0.0.1:2"} {
		start := time.Now()
		var out, errb strings.Builder
		code := run([]string{"-redis", "redis://" + addr + "/0", "bans"}, &out, &errb)
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("protectctl -redis redis://%s/0 bans took %v, want it to fail within 5s", addr, took)
		}
		if code != 1 || !strings.Contains(errb.String(), addr) || !strings.Contains(errb.String(), "check -redis") || out.Len() != 0 {
			t.Fatalf("protectctl -redis redis://%s/0 bans = exit %d, stdout %q, stderr %q; want exit 1 naming the address and saying check -redis", addr, code, out.String(), errb.String())
		}
	}
}

// explain resolves the design's vectors the way Verify would, and touches
// no counter.
func TestExplain(t *testing.T) {
	t.Setenv("HTTP_PROTECT_TRUSTED_PROXIES", "10.0.0.0/8,2001:db8:ffff::/48")
	t.Setenv("HTTP_PROTECT_SAFE_NETWORKS", "192.0.2.0/24")
	t.Setenv("HTTP_PROTECT_MAX_REQUESTS", "2")
	t.Setenv("HTTP_PROTECT_BAN_LIMIT", "4")
	for name, mk := range servers(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			sv := newEnvService(t, s)
			sv.verify(t, "1.2.3.4") // one request left
			for range 2 {
				sv.verify(t, "5.6.7.8") // at its limit: nothing left
			}
			for range 5 {
				sv.verify(t, "6.7.8.9") // past its ban limit: banned
			}
			sv.p.Ban(t.Context(), "198.51.100.0/24", protect.BanOptions{For: time.Hour, Reason: "range"})
			// The service publishes its limits in the background after its
			// first counted request; Close waits for that, so the snapshot
			// holds everything the service wrote and nothing of explain's.
			sv.p.Close()
			before := snapshot(t, s)
			tests := []struct {
				peer    string
				headers []string
				client  string
				step    string
				status  int
			}{
				{"10.0.0.1:5555", []string{"X-Forwarded-For: 6.6.6.6, 1.2.3.4"}, "1.2.3.4", admin.StepAllowed, 200},
				{"10.0.0.1:5555", []string{"X-Forwarded-For: 6.6.6.6", "X-Forwarded-For: 1.2.3.4"}, "1.2.3.4", admin.StepAllowed, 200},
				{"10.0.0.1:5555", []string{"X-Forwarded-For: 1.2.3.4, garbage"}, "", admin.StepUnknown, 429},
				{"10.0.0.1:5555", []string{"X-Forwarded-For: 10.0.0.3, 10.0.0.2"}, "10.0.0.3", admin.StepAllowed, 200},
				{"10.0.0.1:5555", []string{"X-Forwarded-For: [2001:db8::1]:443"}, "2001:db8::1", admin.StepAllowed, 200},
				{"9.9.9.9:1234", []string{"X-Forwarded-For: 1.2.3.4"}, "9.9.9.9", admin.StepAllowed, 200},
				{"[::ffff:10.0.0.1]:5555", []string{"X-Forwarded-For: 1.2.3.4"}, "1.2.3.4", admin.StepAllowed, 200},
				{"10.0.0.1:5555", []string{"X-Forwarded-For: 192.0.2.8"}, "192.0.2.8", admin.StepSafe, 200},
				{"10.0.0.1:5555", []string{"X-Forwarded-For: 5.6.7.8"}, "5.6.7.8", admin.StepLimited, 429},
				{"10.0.0.1:5555", []string{"X-Forwarded-For: 6.7.8.9"}, "6.7.8.9", admin.StepBanned, 403},
				{"10.0.0.1:5555", []string{"X-Forwarded-For: 198.51.100.3"}, "198.51.100.3", admin.StepBanned, 403},
			}
			for _, tt := range tests {
				args := []string{"explain", "-remote", tt.peer}
				for _, h := range tt.headers {
					args = append(args, "-H", h)
				}
				var ex admin.Explanation
				ctlJSON(t, s, &ex, args...)
				if ex.Client != tt.client || ex.Step != tt.step || ex.Status != tt.status {
					t.Errorf("explain %s %v: client %q step %s status %d; want %q %s %d (%s)", tt.peer, tt.headers, ex.Client, ex.Step, ex.Status, tt.client, tt.step, tt.status, ex.Reason)
				}
			}
			if after := snapshot(t, s); !slices.Equal(before, after) {
				t.Fatalf("keys after protectctl explain =\n%v\nwant them as before\n%v", after, before)
			}
		})
	}
}

// snapshot lists every key of the namespace with its value.
func snapshot(t *testing.T, s server) []string {
	t.Helper()
	ctx := t.Context()
	keys, err := s.c.Keys(ctx, s.ns+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		typ, _ := s.c.Type(ctx, k).Result()
		var v any
		switch typ {
		case "string":
			v, _ = s.c.Get(ctx, k).Result()
		case "hash":
			v, _ = s.c.HGetAll(ctx, k).Result()
		case "zset":
			v, _ = s.c.ZRangeWithScores(ctx, k, 0, -1).Result()
		}
		out = append(out, fmt.Sprintf("%s=%v", k, v))
	}
	return out
}

func TestVersion(t *testing.T) {
	var out strings.Builder
	if code := run([]string{"version"}, &out, &strings.Builder{}); code != 0 || !strings.HasPrefix(out.String(), "protectctl ") {
		t.Fatalf("protectctl version = exit %d, %q; want exit 0 and \"protectctl …\"", code, out.String())
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		90 * time.Second:                  "1m30s",
		60 * time.Hour:                    "2d12h0m0s",
		7 * 24 * time.Hour:                "7d",
		24*time.Hour + 30*time.Minute + 1: "1d30m0.000000001s",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
