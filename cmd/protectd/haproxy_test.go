package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const haproxyExamples = "../../examples/proxies/haproxy"

// startHAProxy runs haproxy with the shipped haproxy.cfg in front of
// protectd (an address in HAProxy's format) and app, failing as mode
// says ("closed" as shipped, or "open"), with rules added before the
// lua.protect one, and returns the address it listens on.
func startHAProxy(t *testing.T, bin, protectd, app, mode string, rules ...string) string {
	t.Helper()
	return startHAProxyOn(t, bin, "", protectd, app, mode, rules...)
}

// startHAProxyOn is startHAProxy with bind options on its listener
// ("proto h2": HTTP/2 without TLS).
func startHAProxyOn(t *testing.T, bin, bindOptions, protectd, app, mode string, rules ...string) string {
	t.Helper()
	listen := freePort(t)
	conf, err := os.ReadFile(filepath.Join(haproxyExamples, "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) > 0 {
		// Rules of a gateway's, before the one that asks protectd.
		conf = []byte(strings.Replace(string(conf), "    http-request lua.protect ",
			"    "+strings.Join(rules, "\n    ")+"\n    http-request lua.protect ", 1))
	}
	lua, err := filepath.Abs(filepath.Join(haproxyExamples, "protect.lua"))
	if err != nil {
		t.Fatal(err)
	}
	replaced := strings.NewReplacer(
		"lua-load /etc/haproxy/protect.lua", "lua-load "+lua,
		"http-request lua.protect 127.0.0.1:8089 closed", "http-request lua.protect "+protectd+" "+mode,
		"server app 127.0.0.1:3000", "server app "+app,
		"server protectd 127.0.0.1:8089", "server protectd "+protectd,
		"bind 127.0.0.1:8080", strings.TrimSpace("bind "+listen+" "+bindOptions),
	).Replace(string(conf))
	for _, want := range []string{lua, "lua.protect " + protectd, "server app " + app, "server protectd " + protectd, "bind " + listen} {
		if !strings.Contains(replaced, want) {
			t.Fatalf("haproxy.cfg with its addresses replaced = %s; want %q in it: the addresses are not where the test expects them", replaced, want)
		}
	}
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(replaced), 0o644); err != nil {
		t.Fatal(err)
	}
	// -db: in the foreground; SIGUSR1 stops it softly.
	startProxy(t, "haproxy", listen, syscall.SIGUSR1, exec.Command(bin, "-db", "-f", path))
	return listen
}

// TestHAProxy runs examples/proxies/haproxy (haproxy.cfg and its Lua
// action protect.lua), as shipped with its addresses changed, with
// Debian's HAProxy in front of one protectd, failing closed and failing
// open: the seed scenario of TestNginx, a consumer and plan named by a
// gateway's rules, then protectd stopped.
func TestHAProxy(t *testing.T) {
	bin := needBinary(t, "haproxy", ".ci/parts/31-haproxy.sh")
	app := startUpstream(t)
	d := startDaemon(t, seedEnv...)
	closed := "http://" + startHAProxy(t, bin, d.addr, app.addr, "closed")
	open := "http://" + startHAProxy(t, bin, d.addr, app.addr, "open")
	seedScenario(t, "haproxy (fail closed)", closed, "127.0.0.2", d, app)
	seedScenario(t, "haproxy (fail open)", open, "127.0.0.3", d, app)

	// The app's own 403 reaches the client as the app wrote it.
	c := clientFrom("127.0.0.5")
	if a := get(t, c, closed+"/forbidden"); a.code != 403 || a.body != "the app says no\n" {
		t.Fatalf("GET /forbidden through haproxy = %d %q, want the app's 403 \"the app says no\"", a.code, a.body)
	}

	// A gateway's rules name the consumer and plan in the variables
	// protect.lua reads (here from headers, as if it had authenticated
	// them): the consumer is held to its plan, and protectd's 503 for an
	// unknown plan reaches the client whole.
	gw := "http://" + startHAProxy(t, bin, d.addr, app.addr, "closed",
		"http-request set-var(txn.protect_consumer) req.hdr(x-test-user) if { req.hdr(x-test-user) -m found }",
		"http-request set-var(txn.protect_plan) req.hdr(x-test-plan) if { req.hdr(x-test-plan) -m found }")
	for i, want := range []int{200, 200, 429} {
		a := get(t, c, gw+"/", "X-Test-User", "acme", "X-Test-Plan", "pro")
		noProtectHeaders(t, "GET / of consumer acme through haproxy", a)
		if a.code != want || (want == 429 && (problemCode(t, a) != "rate_limited" || a.header.Get("Retry-After") == "")) ||
			!strings.Contains(a.header.Get("RateLimit"), `"burst";r=`) {
			t.Fatalf("GET / #%d of consumer acme, plan pro, through haproxy = %d %v %q; want %d with the plan's RateLimit (and, refused, rate_limited with Retry-After)", i+1, a.code, a.header, a.body, want)
		}
	}
	if k := app.keys.Load(); k != "acme" {
		t.Fatalf("%s at the app for consumer acme through haproxy = %q, want acme", hdrKey, k)
	}
	if a := get(t, c, gw+"/", "X-Test-User", "acme", "X-Test-Plan", "gold"); a.code != 503 || problemCode(t, a) != "unknown_plan" {
		t.Fatalf("GET / of consumer acme, plan gold, through haproxy = %d %v %q; want 503 unknown_plan", a.code, a.header, a.body)
	}

	if code := d.stop(); code != exitOK {
		t.Fatalf("d.stop() = exit %d, want 0", code)
	}
	wantUnavailable(t, "haproxy (fail closed)", closed, c, app)
	// Even the banned client is served by the fail-open site: that is
	// what failing open means.
	wantServedUnchecked(t, "haproxy (fail open)", open, clientFrom("127.0.0.3"), app)
}
