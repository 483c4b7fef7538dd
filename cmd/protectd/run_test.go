package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunBadSettings: every bad setting exits 2 with the setting quoted,
// before anything listens.
func TestRunBadSettings(t *testing.T) {
	dir := t.TempDir()
	badFile := filepath.Join(dir, "plans.json")
	if err := os.WriteFile(badFile, []byte(`{"pro": {"rates": [{"limit": 0, "period": "1s"}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  string
		want string
	}{
		{"HTTP_PROTECT_MAX_REQUESTS=lots", `HTTP_PROTECT_MAX_REQUESTS="lots"`},
		{"HTTP_PROTECT_TRUSTED_PROXIES=10.0.0.0/33", `10.0.0.0/33`},
		{"HTTP_PROTECT_LISTEN=8089", `HTTP_PROTECT_LISTEN="8089"`},
		{"HTTP_PROTECT_LISTEN=127.0.0.1:http", `HTTP_PROTECT_LISTEN="127.0.0.1:http"`},
		{"HTTP_PROTECT_PLANS=" + filepath.Join(dir, "missing.json"), `HTTP_PROTECT_PLANS="` + filepath.Join(dir, "missing.json") + `"`},
		{"HTTP_PROTECT_PLANS=" + badFile, `plan "pro"`},
		{`HTTP_PROTECT_PLANS={"pro": {"rates": [], "tiers": []}}`, `unknown field "tiers"`},
		{"HTTP_PROTECT_REDIS_URL=http://example.com", `HTTP_PROTECT_REDIS_URL: protect: redis URL: not a Redis URL`},
		{"HTTP_PROTECT_LISTN=127.0.0.1:1", `HTTP_PROTECT_LISTN`},
		{"HTTP_PROTECT_TTL=0", `HTTP_PROTECT_TTL="0": 0 is not a duration`},
		{"HTTP_PROTECT_STORE_TIMEOUT=1ns", `HTTP_PROTECT_STORE_TIMEOUT="1ns": want at least 1ms`},
		{"HTTP_PROTECT_TRUSTED_PROXIES=0.0.0.0/0", `write !0.0.0.0/0 if that is meant`},
		{"HTTP_PROTECT_SAFE_NETWORKS=::/0", `write !::/0 if that is meant`},
		{"HTTP_PROTECT_BAN_FACTOR=0.5", `HTTP_PROTECT_BAN_FACTOR="0.5": must be a number of at least 1`},
	} {
		t.Run(tc.env, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			env := []string{trusted, tc.env} // a later entry wins
			code := run(context.Background(), nil, env, &stdout, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
				t.Fatalf("run(env %q) = exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, stderr quoting %s", tc.env, code, stdout.String(), stderr.String(), tc.want)
			}
		})
	}
}

// TestRunReportsEverythingAtOnce: protect's settings, protectd's own and
// the missing trusted proxies are reported in one run, each under its
// variable's name.
func TestRunReportsEverythingAtOnce(t *testing.T) {
	var stdout, stderr bytes.Buffer
	env := []string{"HTTP_PROTECT_TTL=0", "HTTP_PROTECT_BAN_FACTOR=0.5", "HTTP_PROTECT_LISTEN=8089", "HTTP_PROTECT_PLANS={"}
	code := run(context.Background(), []string{"-check"}, env, &stdout, &stderr)
	want := []string{`HTTP_PROTECT_TTL="0"`, `HTTP_PROTECT_BAN_FACTOR="0.5": must be a number of at least 1`,
		`HTTP_PROTECT_LISTEN="8089"`, `HTTP_PROTECT_PLANS="{"`}
	for _, w := range want {
		if code != exitUsage || !strings.Contains(stderr.String(), w) {
			t.Errorf("protectd -check with %q = exit %d, stderr %q; want exit 2, stderr holding %s", env, code, stderr.String(), w)
		}
	}
	if strings.Contains(stderr.String(), "BanFactor") {
		t.Errorf("protectd -check stderr = %q, want the variable's name, not the Go field's", stderr.String())
	}
}

// TestRunTrustedProxies: protectd refuses to start without trusted
// proxies, unless told none; with none, a client's forwarded header is
// never read.
func TestRunTrustedProxies(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		code int
		errs string
	}{
		{nil, exitUsage, "HTTP_PROTECT_TRUSTED_PROXIES is not set"},
		{[]string{"HTTP_PROTECT_TRUSTED_PROXIES="}, exitUsage, "HTTP_PROTECT_TRUSTED_PROXIES is not set"},
		{[]string{"HTTP_PROTECT_TRUSTED_PROXIES=none"}, exitOK, ""},
		{[]string{"HTTP_PROTECT_TRUSTED_PROXIES=!0.0.0.0/0"}, exitOK, ""},
		{[]string{"HTTP_PROTECT_PROXY_COUNT=1"}, exitOK, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"-check"}, tc.env, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.errs) {
			t.Errorf("protectd -check with %q = exit %d, stderr %q; want exit %d, stderr holding %q", tc.env, code, stderr.String(), tc.code, tc.errs)
		}
	}
}

// TestRunCheckListenAddress: a listen address other machines can reach
// is a warning, in -check and at start; loopback is not.
func TestRunCheckListenAddress(t *testing.T) {
	for _, tc := range []struct {
		listen string
		warn   bool
	}{
		{"127.0.0.1:8089", false},
		{"[::1]:8089", false},
		{"localhost:8089", false},
		{":8089", true},
		{"0.0.0.0:8089", true},
		{"192.0.2.10:8089", true},
		{"proxy.internal:8089", true},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"-check"}, []string{trusted, envListen + "=" + tc.listen}, &stdout, &stderr)
		warned := strings.Contains(stderr.String(), "listen address reachable from other machines")
		if code != exitOK || warned != tc.warn {
			t.Errorf("protectd -check with %s=%s = exit %d, warned %v (stderr %q); want exit 0, warned %v", envListen, tc.listen, code, warned, stderr.String(), tc.warn)
		}
	}
}

// TestRunCheckReachesStore: -check asks the store and says what it is; a
// Redis that does not answer fails the check (exit 1), naming where it
// was asked.
func TestRunCheckReachesStore(t *testing.T) {
	var stdout, stderr bytes.Buffer
	env := []string{trusted, "HTTP_PROTECT_REDIS_URL=redis://127.0.0.1:1/0"}
	code := run(context.Background(), []string{"-check"}, env, &stdout, &stderr)
	if code != exitFailure || stderr.String() != "protectd: redis at 127.0.0.1:1 does not answer: connection refused\n" {
		t.Fatalf("protectd -check with a dead Redis = exit %d, stderr %q; want exit 1 naming 127.0.0.1:1", code, stderr.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"-check"}, []string{trusted}, &stdout, &stderr); code != exitOK ||
		!strings.Contains(stdout.String(), "store: memory, in this process") {
		t.Fatalf("protectd -check on memory = exit %d, stdout %q; want exit 0 and the memory store named", code, stdout.String())
	}
	if addr := os.Getenv("PROTECT_REDIS_ADDR"); addr != "" {
		stdout.Reset()
		env := []string{trusted, "HTTP_PROTECT_REDIS_URL=redis://" + addr + "/0"}
		if code := run(context.Background(), []string{"-check"}, env, &stdout, &stderr); code != exitOK ||
			!strings.Contains(stdout.String(), "store: redis at "+addr+", answered in") {
			t.Fatalf("protectd -check on Redis %s = exit %d, stdout %q; want exit 0, the store named as answering", addr, code, stdout.String())
		}
	}
}

func TestRunUsage(t *testing.T) {
	for _, tc := range []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{[]string{"-h"}, exitOK, "HTTP_PROTECT_LISTEN", ""},
		{[]string{"serve"}, exitUsage, "", `unexpected argument "serve"`},
		{[]string{"-nope"}, exitUsage, "", "-nope"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, nil, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.errs) {
			t.Errorf("protectd %q = exit %d, stdout %q, stderr %q; want exit %d, stdout holding %q, stderr holding %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.errs)
		}
	}
}

func TestRunCheck(t *testing.T) {
	var stdout, stderr bytes.Buffer
	env := []string{trusted, plans, "HTTP_PROTECT_MAX_REQUESTS=100", "HTTP_PROTECT_LISTEN=127.0.0.1:1"}
	if code := run(context.Background(), []string{"-check"}, env, &stdout, &stderr); code != exitOK {
		t.Fatalf("protectd -check = exit %d: %s, want exit 0", code, stderr.String())
	}
	if want := `listen 127.0.0.1:1, memory store, 1 plans, max_requests 100`; !strings.HasPrefix(stdout.String(), want) {
		t.Fatalf("protectd -check = stdout %q, want %q…", stdout.String(), want)
	}
}

// TestRunListenBusy: an address that cannot be listened on exits 1 and
// says which.
func TestRunListenBusy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var stderr bytes.Buffer
	code := run(context.Background(), nil, []string{trusted, envListen + "=" + ln.Addr().String()}, io.Discard, &stderr)
	if code != exitFailure || !strings.Contains(stderr.String(), ln.Addr().String()) {
		t.Fatalf("protectd on busy %s = exit %d, stderr %q; want exit 1 naming the address", ln.Addr(), code, stderr.String())
	}
}

// TestRunServesAndShutsDown: the daemon answers on its port and exits 0
// when its context ends, closing the port.
func TestRunServesAndShutsDown(t *testing.T) {
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1")
	for _, path := range []string{"/healthz", "/verify"} {
		req, _ := http.NewRequest("GET", "http://"+d.addr+path, nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("GET %s = %d, want 200", path, res.StatusCode)
		}
	}
	if code := d.stop(); code != exitOK {
		t.Fatalf("d.stop() = exit %d, want 0; log:\n%s", code, d.log)
	}
	if len(d.log.lines(t, "shutting down")) != 1 {
		t.Fatalf("log after d.stop() =\n%s\nwant one shutting down line", d.log)
	}
	if _, err := http.Get("http://" + d.addr + "/healthz"); err == nil {
		t.Fatal("GET /healthz after shutdown = no error, want the port closed")
	}
}

// TestServerTimeouts: no phase of a request may take forever (slowloris).
func TestServerTimeouts(t *testing.T) {
	srv := newServer(http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 {
		t.Fatalf("newServer(...) = %+v, want every timeout and MaxHeaderBytes set", srv)
	}
}
