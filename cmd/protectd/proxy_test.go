package main

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/needs"
)

// What every proxy in front of protectd is held to, end to end: the
// helpers below are the assertions of TestNginx, TestCaddy and
// TestHAProxy.

// needBinary returns the path of a proxy's binary, or skips (fails under
// CI, whose part installs it).
func needBinary(t *testing.T, name, part string) string {
	t.Helper()
	return needs.Binary(t, name, part+" installs it")
}

// seedEnv is protectd's configuration for the seed scenario.
var seedEnv = []string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=100",
	"HTTP_PROTECT_BAN_LIMIT=250", "HTTP_PROTECT_TTL=1h", plans}

// noProtectHeaders fails if a response to a client carries any of
// protectd's X-Protect-* answer headers: they are for the proxy and the
// app only.
func noProtectHeaders(t *testing.T, what string, a answer) {
	t.Helper()
	for name := range a.header {
		if strings.HasPrefix(strings.ToLower(name), "x-protect-") {
			t.Fatalf("%s = %d with header %s: %q, want no X-Protect-* header reaching the client", what, a.code, name, a.header[name])
		}
	}
}

// seedScenario sends 300 requests of one client (connecting from
// client) to base through a proxy in front of protectd (configured with
// seedEnv) and app: exactly 100 served, 150 refused with 429 and 50
// banned with 403, with Retry-After and the RateLimit fields, however
// the client forges X-Forwarded-For, names a consumer, asks for another
// refusal status or writes the headers the proxy copies to the app.
func seedScenario(t *testing.T, proxy, base, client string, d *daemon, app *upstream) {
	t.Helper()
	c := clientFrom(client)
	counts := map[int]int{}
	served, refused := app.served.Load(), len(d.log.lines(t, "refused"))
	for i := range 300 {
		// Every request forges another client address and names a
		// consumer under a real plan: neither may reach protectd.
		a := get(t, c, base+"/hello", "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i%250+1),
			hdrConsumer, fmt.Sprintf("acme-%d", i), hdrPlan, "pro", hdrRefusalStatus, "401",
			hdrKey, "forged", "RateLimit", `"protect";r=1000;t=1`)
		counts[a.code]++
		what := fmt.Sprintf("GET /hello #%d through %s", i+1, proxy)
		noProtectHeaders(t, what, a)
		if got := a.header.Get("RateLimit-Policy"); got != `"protect";q=100;w=3600` {
			t.Fatalf("%s = %d, RateLimit-Policy %q; want %q", what, a.code, got, `"protect";q=100;w=3600`)
		}
		switch {
		case i < 100:
			if a.code != 200 || a.body != "hello\n" || a.header.Get("RateLimit") != fmt.Sprintf(`"protect";r=%d;t=3600`, 99-i) {
				t.Fatalf("%s = %d %v %q, want 200 hello, RateLimit r=%d;t=3600", what, a.code, a.header, a.body, 99-i)
			}
		case i < 250:
			if a.code != 429 || a.header.Get("Retry-After") != "3600" || a.header.Get("RateLimit") != `"protect";r=0;t=3600` ||
				a.header.Get("Cache-Control") != "no-store" || problemCode(t, a) != "rate_limited" {
				t.Fatalf("%s = %d %v %q, want 429 rate_limited, Retry-After 3600, RateLimit r=0;t=3600, no-store", what, a.code, a.header, a.body)
			}
		default:
			if a.code != 403 || a.header.Get("Retry-After") != "3600" || problemCode(t, a) != "banned" {
				t.Fatalf("%s = %d %v %q, want 403 banned, Retry-After 3600", what, a.code, a.header, a.body)
			}
		}
	}
	if counts[200] != 100 || counts[429] != 150 || counts[403] != 50 || app.served.Load()-served != 100 {
		t.Fatalf("300 × GET /hello through %s = statuses %v, app served %d; want 100 × 200, 150 × 429, 50 × 403, app 100", proxy, counts, app.served.Load()-served)
	}
	if k := app.keys.Load(); k != client {
		t.Fatalf("%s at the app through %s = %q, want %s", hdrKey, proxy, k, client)
	}
	if n := len(d.log.lines(t, "refused")) - refused; n != 200 {
		t.Fatalf("protectd's log lines refused through %s = %d, want 200", proxy, n)
	}
}

// wantUnavailable: with protectd down, a fail-closed proxy answers 503
// unavailable with Retry-After: 5, and does not ask the app.
func wantUnavailable(t *testing.T, proxy, base string, c *http.Client, app *upstream) {
	t.Helper()
	before := app.served.Load()
	a := get(t, c, base+"/")
	what := "GET / through " + proxy + " with protectd down"
	noProtectHeaders(t, what, a)
	if a.code != 503 || a.header.Get("Retry-After") != "5" || problemCode(t, a) != "unavailable" || app.served.Load() != before {
		t.Fatalf("%s = %d %v %q; want 503 unavailable, Retry-After 5, the app not asked", what, a.code, a.header, a.body)
	}
}

// wantServedUnchecked: with protectd down, a fail-open proxy serves
// every client, even a banned one, without RateLimit fields.
func wantServedUnchecked(t *testing.T, proxy, base string, c *http.Client, app *upstream) {
	t.Helper()
	before := app.served.Load()
	a := get(t, c, base+"/")
	what := "GET / through " + proxy + " with protectd down"
	noProtectHeaders(t, what, a)
	if a.code != 200 || a.body != "hello\n" || a.header.Get("RateLimit") != "" || app.served.Load() != before+1 {
		t.Fatalf("%s = %d %v %q; want 200 hello without RateLimit, served by the app", what, a.code, a.header, a.body)
	}
}

// startProxy runs a proxy's command until the test ends, and waits until
// it accepts connections on listen. It is stopped by its PID, with sig
// first (its graceful stop).
func startProxy(t *testing.T, name, listen string, sig syscall.Signal, cmd *exec.Cmd) {
	t.Helper()
	out := &logBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(sig) // the PID is ours
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			t.Fatalf("%s exited before it listened, want it listening on %s: %s", name, listen, out)
		default:
		}
		if dialable(listen) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s = not listening on %s after 20s, want listening: %s", name, listen, out)
}

// dialable reports whether something accepts TCP connections on addr.
func dialable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
