package envconfig

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/redisstore"
)

func TestRedisWaitErrors(t *testing.T) {
	const url = "HTTP_PROTECT_REDIS_URL=redis://127.0.0.1:1"
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"negative replicas", []string{url, "HTTP_PROTECT_REDIS_WAIT_REPLICAS=-1"},
			`HTTP_PROTECT_REDIS_WAIT_REPLICAS="-1": want a count of replicas: 0 waits for none, 1 or more waits for that many`},
		{"replicas not a number", []string{url, "HTTP_PROTECT_REDIS_WAIT_REPLICAS=one"},
			`HTTP_PROTECT_REDIS_WAIT_REPLICAS="one": want a count of replicas: 0 waits for none, 1 or more waits for that many`},
		{"replicas without Redis", []string{"HTTP_PROTECT_REDIS_WAIT_REPLICAS=1"},
			`HTTP_PROTECT_REDIS_WAIT_REPLICAS="1": no Redis to wait for: set HTTP_PROTECT_REDIS_URL`},
		{"timeout not a duration", []string{url, "HTTP_PROTECT_REDIS_WAIT_REPLICAS=1", "HTTP_PROTECT_REDIS_WAIT_TIMEOUT=soon"},
			`HTTP_PROTECT_REDIS_WAIT_TIMEOUT="soon": want a duration such as 90s, 15m, 2d12h, or a bare number of seconds`},
		{"timeout zero", []string{url, "HTTP_PROTECT_REDIS_WAIT_REPLICAS=1", "HTTP_PROTECT_REDIS_WAIT_TIMEOUT=0"},
			`HTTP_PROTECT_REDIS_WAIT_TIMEOUT="0": want at least 1ms: WAIT counts milliseconds`},
		{"timeout under a millisecond", []string{url, "HTTP_PROTECT_REDIS_WAIT_REPLICAS=1", "HTTP_PROTECT_REDIS_WAIT_TIMEOUT=500us"},
			`HTTP_PROTECT_REDIS_WAIT_TIMEOUT="500us": want at least 1ms: WAIT counts milliseconds`},
		{"timeout without replicas", []string{url, "HTTP_PROTECT_REDIS_WAIT_TIMEOUT=10ms"},
			`HTTP_PROTECT_REDIS_WAIT_TIMEOUT="10ms": waits for nothing without HTTP_PROTECT_REDIS_WAIT_REPLICAS of 1 or more`},
		{"timeout with no replicas", []string{url, "HTTP_PROTECT_REDIS_WAIT_REPLICAS=0", "HTTP_PROTECT_REDIS_WAIT_TIMEOUT=10ms"},
			`HTTP_PROTECT_REDIS_WAIT_TIMEOUT="10ms": waits for nothing: HTTP_PROTECT_REDIS_WAIT_REPLICAS="0" waits for no replica`},
		{"timeout over half the default store timeout", []string{url, "HTTP_PROTECT_REDIS_WAIT_REPLICAS=1", "HTTP_PROTECT_REDIS_WAIT_TIMEOUT=60ms"},
			`HTTP_PROTECT_REDIS_WAIT_TIMEOUT="60ms": 60ms is longer than half of HTTP_PROTECT_STORE_TIMEOUT (unset, so 100ms), the most the store waits, so that WAIT answers before the call's deadline`},
		{"timeout over half the store timeout", []string{url, "HTTP_PROTECT_REDIS_WAIT_REPLICAS=1", "HTTP_PROTECT_REDIS_WAIT_TIMEOUT=20ms", "HTTP_PROTECT_STORE_TIMEOUT=30ms"},
			`HTTP_PROTECT_REDIS_WAIT_TIMEOUT="20ms": 20ms is longer than half of HTTP_PROTECT_STORE_TIMEOUT 30ms, the most the store waits`},
		{"timeout a bare number", []string{url, "HTTP_PROTECT_REDIS_WAIT_REPLICAS=1", "HTTP_PROTECT_REDIS_WAIT_TIMEOUT=20"},
			`HTTP_PROTECT_REDIS_WAIT_TIMEOUT="20": 20s is longer than half of HTTP_PROTECT_STORE_TIMEOUT (unset, so 100ms), the most the store waits, so that WAIT answers before the call's deadline; a bare number is seconds: did you mean 20ms?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(tc.env, Options{})
			if !errors.Is(err, protect.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read(%q) = %v\nwant ErrConfig containing %q", tc.env, err, tc.want)
			}
		})
	}
}

// The two variables reach the store Read dials: on a master without
// replicas, every count waits for one in vain, for the time said, and
// the failure policy decides; REDIS_WAIT_REPLICAS=0 waits for none, and
// REDIS_WAIT_TIMEOUT alone times the wait that Options.Redis asks for.
func TestRedisWaitReachesTheStore(t *testing.T) {
	master := redistest.Start(t)
	for _, tc := range []struct {
		name   string
		addr   string
		env    []string
		opt    redisstore.Options
		status protect.Status
		err    string
	}{
		{"wait", "198.51.100.1", []string{"HTTP_PROTECT_REDIS_WAIT_REPLICAS=1", "HTTP_PROTECT_REDIS_WAIT_TIMEOUT=10ms"}, redisstore.Options{}, protect.Unavailable,
			"protect: redis take 198.51.100.1: not acknowledged by enough replicas: 0 of 1 within 10ms"},
		{"no wait", "198.51.100.2", []string{"HTTP_PROTECT_REDIS_WAIT_REPLICAS=0"}, redisstore.Options{WaitReplicas: 1}, protect.Allowed, ""},
		{"timeout of Options' wait", "198.51.100.3", []string{"HTTP_PROTECT_REDIS_WAIT_TIMEOUT=12ms"}, redisstore.Options{WaitReplicas: 1}, protect.Unavailable,
			"protect: redis take 198.51.100.3: not acknowledged by enough replicas: 0 of 1 within 12ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append([]string{"HTTP_PROTECT_REDIS_URL=redis://" + master.Addr, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1",
				"HTTP_PROTECT_ON_STORE_ERROR=closed", "HTTP_PROTECT_STORE_TIMEOUT=1s", "HTTP_PROTECT_NAMESPACE=" + tc.addr + ":"}, tc.env...)
			tc.opt.Logger = slog.New(slog.DiscardHandler)
			cfg, err := Read(env, Options{Redis: tc.opt})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cfg.Store.(*redisstore.Store).Close() })
			cfg.Logger = slog.New(slog.DiscardHandler)
			p, err := protect.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			d, err := p.VerifyAddr(t.Context(), netip.MustParseAddr(tc.addr))
			gotErr := ""
			if d.Err != nil {
				gotErr = d.Err.Error()
			}
			if err != nil || d.Status != tc.status || gotErr != tc.err || (tc.err != "") != errors.Is(d.Err, redisstore.ErrNotReplicated) {
				t.Errorf("VerifyAddr = %v, %v, %q; want %v, %q", d.Status, err, gotErr, tc.status, tc.err)
			}
		})
	}
}

// Whatever the two variables hold, they set a count of replicas of 0 or
// more and a timeout of 1ms or more, or are refused; and an error that
// names one with a value quotes its value.
func FuzzRedisWait(f *testing.F) {
	for _, s := range [][2]string{{"1", "20ms"}, {"0", ""}, {"-1", "0"}, {"2", "20"}, {"x", "1e3"}, {"99999999999", "500us"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, replicas, timeout string) {
		if strings.ContainsAny(replicas+timeout, "\x00\n=") {
			return // not an environment entry
		}
		var c settings
		if err := envWaitReplicas(&c, replicas); err == nil && c.redisWait.replicas < 0 {
			t.Fatalf("REDIS_WAIT_REPLICAS=%q gives %d replicas", replicas, c.redisWait.replicas)
		}
		if err := envWaitTimeout(&c, timeout); err == nil && c.redisWait.timeout < time.Millisecond {
			t.Fatalf("REDIS_WAIT_TIMEOUT=%q gives %v", timeout, c.redisWait.timeout)
		}
		// No REDIS_URL: nothing is dialed, and a wait is refused.
		env := []string{"HTTP_PROTECT_REDIS_WAIT_REPLICAS=" + replicas, "HTTP_PROTECT_REDIS_WAIT_TIMEOUT=" + timeout}
		_, err := Read(env, Options{})
		if err == nil {
			return
		}
		msg := err.Error()
		for _, v := range []struct{ name, value string }{{"REDIS_WAIT_REPLICAS", replicas}, {"REDIS_WAIT_TIMEOUT", timeout}} {
			name := "HTTP_PROTECT_" + v.name + "="
			quoted := name + fmt.Sprintf("%q", strings.TrimSpace(v.value))
			if strings.Count(msg, name) != strings.Count(msg, quoted) {
				t.Fatalf("Read(%q) = %v: %s without its value quoted", env, err, name)
			}
		}
	})
}
