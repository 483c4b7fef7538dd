package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/httpprotect/protect/challenge"
	"github.com/httpprotect/protect/internal/browsertest"
)

// htmlApp is an app that serves an HTML page at /original, which the
// browser waits for, and counts those it served.
func htmlApp(t *testing.T) (addr string, served *atomic.Int64) {
	t.Helper()
	served = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/original" {
			http.NotFound(w, r)
			return
		}
		served.Add(1)
		fmt.Fprintf(w, `<!doctype html><title>original</title><p id="landed">%s</p>`, r.URL.Query().Get("n"))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), served
}

// challenged is how many requests for /original protectd challenged, by
// its "refused" log lines (the browser's requests for /favicon.ico are
// challenged too).
func challenged(t *testing.T, d *daemon) int {
	t.Helper()
	n := 0
	for _, l := range d.log.lines(t, "refused") {
		if l["code"] == "challenged" && strings.HasPrefix(fmt.Sprint(l["uri"]), "/original") {
			n++
		}
	}
	return n
}

// TestChallengeBrowserProxies has Debian's chromium, as a visitor, go
// through the shipped nginx, Caddy and HAProxy configs to protectd with the
// challenge on (the default difficulty): past the threshold it gets the
// page, whose script solves it and posts the answer through the proxy;
// it is sent back to the URL it asked for and served, once; later
// requests carry the pass cookie and are served without a challenge.
func TestChallengeBrowserProxies(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	env := []string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=1",
		"HTTP_PROTECT_BAN_LIMIT=1000", "HTTP_PROTECT_TTL=1h", "HTTP_PROTECT_CHALLENGE_SECRET=0123456789abcdef0123456789abcdef"}
	proxies := []struct {
		name  string
		start func(t *testing.T, protectd, app string) string
	}{
		{"nginx", func(t *testing.T, protectd, app string) string {
			return startNginx(t, needNginx(t), "site-fail-closed.conf", protectd, app)
		}},
		{"caddy", func(t *testing.T, protectd, app string) string {
			return startCaddy(t, caddyBins(t)[0], protectd, app)
		}},
		{"haproxy", func(t *testing.T, protectd, app string) string {
			return startHAProxy(t, needBinary(t, "haproxy", ".ci/parts/31-haproxy.sh"), protectd, app, "closed")
		}},
	}
	type stack struct {
		front  string
		d      *daemon
		served *atomic.Int64
	}
	stacks := make([]stack, len(proxies))
	for i, px := range proxies {
		app, served := htmlApp(t)
		d := startDaemon(t, env...)
		stacks[i] = stack{"http://" + px.start(t, d.addr, app), d, served}
	}
	// Started last, so stopped first: the proxies and servers would
	// otherwise wait for its kept-alive connections as they stop.
	ctx := browsertest.Start(t, 1024, 768, 3*time.Minute)
	for i, px := range proxies {
		// The browser connects from 127.0.0.1, as the proxy does: a chain
		// all trusted, so protectd counts 127.0.0.1, the leftmost.
		front, d, served := stacks[i].front, stacks[i].d, stacks[i].served
		if err := chromedp.Do(ctx, browsertest.ClearCookies, chromedp.Navigate(front+"/original?n=warm")); err != nil {
			t.Fatalf("%s: chromium: %v", px.name, err)
		}
		want := front + "/original?n=solved"
		before, chal := served.Load(), challenged(t, d)
		start := time.Now()
		err := chromedp.Do(ctx, chromedp.Navigate(want), chromedp.WaitVisible(chromedp.CSS("#landed")))
		if err != nil {
			t.Fatalf("%s: solving: %v", px.name, err)
		}
		t.Logf("%s: solved and served in %v", px.name, time.Since(start))
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		landed, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#landed")))
		if loc != want || landed != "solved" || served.Load() != before+1 || challenged(t, d) != chal+1 {
			t.Fatalf("%s: after the page = at %q (%q), app served %d, challenged %d; want %q served once after one challenge",
				px.name, loc, landed, served.Load()-before, challenged(t, d)-chal, want)
		}
		cookies, err := browsertest.Cookies(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(cookies) != 1 || cookies[0].Name != challenge.CookieName || !cookies[0].HTTPOnly {
			t.Fatalf("%s: cookies = %+v, want the HttpOnly pass alone", px.name, cookies)
		}
		chal = challenged(t, d)
		for i := range 3 {
			u := fmt.Sprintf("%s/original?n=again%d", front, i)
			if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
				t.Fatal(err)
			}
			if landed, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#landed"))); err != nil || landed != fmt.Sprintf("again%d", i) {
				t.Fatalf("%s: GET %s with the pass = %q, %v; want served", px.name, u, landed, err)
			}
		}
		if got := challenged(t, d); got != chal {
			t.Fatalf("%s: challenged %d more times with the pass, want 0", px.name, got-chal)
		}
	}
}
