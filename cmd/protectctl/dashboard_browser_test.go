package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/browsertest"
	"github.com/httpprotect/protect/internal/needs"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/redisstore"
)

// shotsEnv names a directory the browser test writes its screenshots
// into instead of its own temporary one: docs/admin.md's images are made
// with
//
//	PROTECT_DASHBOARD_SHOTS=$PWD/docs/img go test -count=1 -run TestDashboardBrowser -v ./cmd/protectctl
//
// (-count=1: the test builds protectd itself, which go test's cache
// does not see).
const shotsEnv = "PROTECT_DASHBOARD_SHOTS"

// dashboardBans is how many bans the browser test lists and searches.
const dashboardBans = 100_000

// browser is one headless chromium tab on a protectd's dashboard.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string // the admin listener, http://host:port
	shots string // where screenshots go
}

// do runs actions, failing the test with what on an error.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("chromium: %s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("chromium: evaluate %s: %v", expr, err)
	}
	return v
}

// wait polls a JavaScript predicate until it holds, or fails the test.
func (b *browser) wait(what, predicate string) {
	b.t.Helper()
	b.do(what, chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
}

// shot writes a PNG of the viewport as name.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("chromium: screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.shots, "dashboard-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s: %d bytes", path, len(png))
}

// loadBans runs action on the bans page and waits until it has listed
// them again, returning how long that took.
func (b *browser) loadBans(what string, action chromedp.Action[chromedp.Void]) time.Duration {
	b.t.Helper()
	eval[chromedp.Void](b, `delete document.body.dataset.bansLoaded`)
	start := time.Now()
	b.do(what, action)
	b.wait(what, `document.body.dataset.bansLoaded !== undefined`)
	return time.Since(start)
}

func startBrowser(t *testing.T, base string) *browser {
	t.Helper()
	ctx := browsertest.Start(t, 1100, 660, 10*time.Minute)
	shots := os.Getenv(shotsEnv)
	if shots == "" {
		shots = t.TempDir()
	}
	return &browser{t: t, ctx: ctx, base: base, shots: shots}
}

// bearer sends one request to the admin API with the token.
func bearer(t *testing.T, method, url, token string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, body
}

// TestDashboardBrowser drives the dashboard of a real protectd on a real
// Redis in headless chromium, as an operator would: log in (a wrong
// token first), find a ban protectctl wrote, lift it and ban from the
// page (and /verify agrees), allow, read the lists and follow the
// journal, watch the chart count a burst's refusals, see a cross-site
// form refused, and list and search 100,000 bans, logging how long each
// took (the figures of docs/admin.md). Screenshots go to a temporary
// directory, or to $PROTECT_DASHBOARD_SHOTS.
func TestDashboardBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser and a real Redis")
	}
	needs.Binary(t, "chromium", "apt-get install chromium; .ci/parts/70-chromium.sh")
	srv := redistest.Start(t)
	redisURL := "redis://" + srv.Addr + "/0"
	const token = "0123456789abcdef0123456789abcdef"
	drop := filepath.Join(t.TempDir(), "drop.txt")
	if err := os.WriteFile(drop, []byte("100.64.0.0/10 ; SBL1\n192.0.2.128/25 ; SBL2\n233.252.0.0/24 ; SBL3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	verify, adminAddr := startProtectd(t, "HTTP_PROTECT_REDIS_URL="+redisURL, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1",
		"HTTP_PROTECT_MAX_REQUESTS=5", "HTTP_PROTECT_BAN_LIMIT=1000",
		// Each page of a listing of 100,000 bans has its StoreTimeout: a
		// machine busy with other tests must not make one a failure.
		"HTTP_PROTECT_STORE_TIMEOUT=5s", "HTTP_PROTECT_BLOCKLISTS=drop=spamhaus:"+drop,
		"HTTP_PROTECT_ADMIN_LISTEN=127.0.0.1:0", "HTTP_PROTECT_ADMIN_TOKEN="+token)
	base := "http://" + adminAddr
	ask := func(client string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+verify+"/verify", nil)
		req.Header.Set("X-Forwarded-For", client)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	ctlRedis := func(args ...string) {
		t.Helper()
		var out, errb strings.Builder
		if code := run(append([]string{"-redis", redisURL}, args...), &out, &errb); code != 0 {
			t.Fatalf("protectctl %q = exit %d, stderr %s; want exit 0", args, code, errb.String())
		}
	}
	total := func(query string) int {
		t.Helper()
		res, body := bearer(t, "GET", base+"/v1/bans?limit=1&"+query, token)
		n, err := strconv.Atoi(res.Header.Get(admin.HeaderTotal))
		if res.StatusCode != 200 || err != nil {
			t.Fatalf("GET /v1/bans?%s = %d %s, want 200 and %s", query, res.StatusCode, body, admin.HeaderTotal)
		}
		return n
	}
	b := startBrowser(t, base)

	// A wrong token is the login form again, and a write without a
	// session from that page is 401: nothing changes.
	b.do("the login form",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#login")),
		chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token-at-all"),
		chromedp.Click(chromedp.CSS("#login button")),
		chromedp.WaitVisible(chromedp.CSS("#login-error")))
	if msg := eval[string](b, `document.querySelector("#login-error").textContent`); msg != "Wrong token." {
		t.Fatalf("login with a wrong token: the form says %q, want %q", msg, "Wrong token.")
	}
	b.shot("login")
	status := eval[int](b, `fetch("/v1/bans", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({targets: ["203.0.113.50"]})}).then(r => r.status)`)
	if status != 401 || total("") != 0 {
		t.Fatalf("POST /v1/bans from the login page after a wrong token = %d, bans %d; want 401 and none", status, total(""))
	}

	// The right token opens the dashboard.
	b.do("login",
		chromedp.SetValue(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#login button")),
		chromedp.WaitVisible(chromedp.CSS("#page-now")))

	// A ban protectctl writes in Redis shows on the bans page, and a
	// search finds it.
	ctlRedis("ban", "-for", "2h", "-reason", "written by protectctl", "-by", "alice", "203.0.113.7")
	ctlRedis("ban", "-for", "36h", "-reason", "scanner network", "-by", "alice", "198.51.100.0/24")
	ctlRedis("ban", "-permanent", "-reason", "abuse report #4411", "-by", "bob", "2001:db8:4411::/48")
	ctlRedis("ban", "-for", "30m", "-reason", "credential stuffing", "consumer:acme-trial")
	if code := ask("203.0.113.7"); code != 403 {
		t.Fatalf("/verify for 203.0.113.7, banned by protectctl = %d, want 403", code)
	}
	b.do("the bans page", chromedp.Navigate(base+"/#bans"), chromedp.WaitVisible(chromedp.CSS(`#bans-table tr[data-key="203.0.113.7"]`)))
	b.loadBans("search 203.0.113.7", chromedp.Steps(
		chromedp.SetValue(chromedp.CSS("#bans-q"), "203.0.113.7"),
		chromedp.Click(chromedp.CSS("#ban-search button[type=submit]"))))
	rows := eval[[]string](b, `[...document.querySelectorAll("#bans-table tbody tr")].map(r => r.dataset.key)`)
	count := eval[string](b, `document.querySelector("#bans-count").textContent`)
	if len(rows) != 1 || rows[0] != "203.0.113.7" || count != "1–1 of 1" {
		t.Fatalf("bans page searched for 203.0.113.7 = rows %q, %q; want 203.0.113.7 alone, 1–1 of 1", rows, count)
	}

	b.loadBans("search 198.51.100.23", chromedp.Steps(
		chromedp.SetValue(chromedp.CSS("#bans-q"), "198.51.100.23"),
		chromedp.Click(chromedp.CSS("#ban-search button[type=submit]"))))
	rows = eval[[]string](b, `[...document.querySelectorAll("#bans-table tbody tr")].map(r => r.dataset.key)`)
	if len(rows) != 1 || rows[0] != "198.51.100.0/24" {
		t.Fatalf("bans page searched for 198.51.100.23 = rows %q, want the range that refuses it, 198.51.100.0/24", rows)
	}
	b.loadBans("search 203.0.113.7 again", chromedp.Steps(
		chromedp.SetValue(chromedp.CSS("#bans-q"), "203.0.113.7"),
		chromedp.Click(chromedp.CSS("#ban-search button[type=submit]"))))

	// Lifted from the page, the client is served again.
	b.loadBans("lift 203.0.113.7", chromedp.Click(chromedp.CSS(`tr[data-key="203.0.113.7"] button[data-target]`)))
	if n := eval[int](b, `document.querySelectorAll('#bans-table tr[data-key="203.0.113.7"]').length`); n != 0 {
		t.Fatalf("bans page after lifting 203.0.113.7 = %d rows of it, want none", n)
	}
	if code := ask("203.0.113.7"); code != 200 {
		t.Fatalf("/verify for 203.0.113.7 lifted from the page = %d, want 200", code)
	}

	// Banned from the page, the client is refused.
	b.loadBans("clear the search", chromedp.Steps(
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#bans-q").value = ""`),
		chromedp.Click(chromedp.CSS("#ban-search button[type=submit]"))))
	b.loadBans("ban 203.0.113.8", chromedp.Steps(
		chromedp.SetValue(chromedp.CSS("#ban-targets"), "203.0.113.8"),
		chromedp.SetValue(chromedp.CSS("#ban-reason"), "banned from the dashboard"),
		chromedp.SetValue(chromedp.CSS("#ban-for"), "1h"),
		chromedp.Click(chromedp.CSS("#ban-form button[type=submit]"))))
	b.do("the new ban", chromedp.WaitVisible(chromedp.CSS(`#bans-table tr[data-key="203.0.113.8"]`)))
	if code := ask("203.0.113.8"); code != 403 {
		t.Fatalf("/verify for 203.0.113.8 banned from the page = %d, want 403", code)
	}
	res, body := bearer(t, "GET", base+"/v1/bans?q=203.0.113.8", token)
	var recs []admin.BanRecord
	if json.Unmarshal(body, &recs) != nil || len(recs) != 1 || recs[0].Reason != "banned from the dashboard" || recs[0].By != "dashboard" ||
		recs[0].SecondsLeft == nil || *recs[0].SecondsLeft > 3600 || *recs[0].SecondsLeft < 3500 {
		t.Fatalf("GET /v1/bans?q=203.0.113.8 = %d %s, want its ban: 1h, by dashboard, with its reason", res.StatusCode, body)
	}
	b.shot("bans")

	// The allowlist takes an entry from the page.
	b.do("allow 192.0.2.10",
		chromedp.Navigate(base+"/#allows"),
		chromedp.WaitVisible(chromedp.CSS("#allow-form")),
		chromedp.SetValue(chromedp.CSS("#allow-targets"), "192.0.2.10"),
		chromedp.SetValue(chromedp.CSS("#allow-reason"), "office gateway"),
		chromedp.SetValue(chromedp.CSS("#allow-for"), "168h"),
		chromedp.Click(chromedp.CSS("#allow-form button[type=submit]")))
	b.wait("the allow", `[...document.querySelectorAll("#allows-table td.key")].some(td => td.textContent === "192.0.2.10")`)
	b.shot("allows")

	// The lists page shows the block list with its entries.
	b.do("the lists page", chromedp.Navigate(base+"/#lists"), chromedp.WaitVisible(chromedp.CSS("#page-lists")))
	b.wait("the block list", `document.querySelectorAll("#lists-table tbody td.key").length === 1`)
	if cells := eval[[]string](b, `[...document.querySelectorAll("#lists-table tbody td")].map(td => td.textContent)`); len(cells) != 5 || cells[0] != "drop" || cells[1] != "up" || cells[2] != "3" {
		t.Fatalf("lists page = %q, want drop, up, 3 entries", cells)
	}
	b.shot("lists")

	// The events page follows the journal: a ban written while it is
	// open appears.
	b.do("the events page", chromedp.Navigate(base+"/#events"), chromedp.WaitVisible(chromedp.CSS("#page-events")))
	b.wait("the lift of 203.0.113.7", `document.querySelector('#events-table tr[data-kind="lift"][data-key="203.0.113.7"]') !== null`)
	ctlRedis("ban", "-for", "10m", "-reason", "seen live", "203.0.113.99")
	b.wait("the ban of 203.0.113.99, live", `document.querySelector('#events-table tr[data-kind="ban"][data-key="203.0.113.99"]') !== null`)
	b.shot("events")

	// The chart counts the refusals of a burst: 20 requests of a client
	// allowed 5 are 15 limited.
	b.do("the now page", chromedp.Navigate(base+"/?fresh#now"), chromedp.WaitVisible(chromedp.CSS("#page-now")))
	b.wait("two samples", `Number(document.body.dataset.samples) >= 2`)
	for range 3 {
		ask("203.0.113.77") // a few served requests, for the chart
	}
	for range 20 {
		ask("203.0.113.20")
	}
	b.wait("the burst in the chart", `document.querySelector('#legend tr[data-status="limited"]').dataset.sum === "15"`)
	samples := eval[int](b, `Number(document.body.dataset.samples)`)
	b.wait("two samples more", fmt.Sprintf(`Number(document.body.dataset.samples) >= %d`, min(samples+2, 301)))
	sums := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll("#legend tbody tr")].map(r => [r.dataset.status, r.dataset.sum]))`)
	lines := eval[[]string](b, `[...document.querySelectorAll("#chart polyline")].map(p => p.dataset.status)`)
	refused := eval[[]string](b, `[...document.querySelectorAll("#refused tbody td")].slice(0, 3).map(td => td.textContent)`)
	if sums["limited"] != "15" || sums["allowed"] != "8" || sums["banned"] != "0" || strings.Join(lines, " ") != "allowed limited" ||
		strings.Join(refused, " ") != "203.0.113.20 limited 15" {
		t.Fatalf("now page after a burst = sums %v, lines %q, top refused %q; want limited 15, allowed 8, banned 0, lines allowed limited, 203.0.113.20 limited 15",
			sums, lines, refused)
	}
	if os.Getenv(shotsEnv) != "" {
		traffic(t, ask, 40*time.Second) // for the picture alone: a minute's worth of it
	}
	b.shot("now")

	// A form another page posts across origins is refused, and writes
	// nothing: its cookie goes with it (same site, another port) but
	// not the CSRF token.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/v1/bans" enctype="text/plain">`+
			`<input name='{"targets": ["203.0.113.66"], "reason": "csrf", "pad": "' value='"}'></form>`+
			`<script>document.getElementById("f").submit()</script>`, base)
	}))
	t.Cleanup(evil.Close)
	b.do("a cross-site form", chromedp.Navigate(evil.URL))
	b.wait("the answer to the form", fmt.Sprintf(`location.href === %q && document.body !== null && document.body.innerText.includes("code")`, base+"/v1/bans"))
	var p admin.Problem
	if text := eval[string](b, `document.body.innerText`); json.Unmarshal([]byte(text), &p) != nil || p.Status != 403 || p.Code != admin.CodeForbidden {
		t.Fatalf("a cross-site form post to /v1/bans = %q, want 403 code %s", text, admin.CodeForbidden)
	}
	if n := total("q=203.0.113.66"); n != 0 {
		t.Fatalf("bans of 203.0.113.66 after a cross-site form = %d, want none", n)
	}

	// 100,000 bans list and search a page at a time.
	before := total("")
	start := time.Now()
	fillBans(t, redisURL, dashboardBans)
	t.Logf("%d bans written in %v", dashboardBans, time.Since(start).Round(time.Millisecond))
	if n := total(""); n != before+dashboardBans {
		t.Fatalf("bans after writing %d = %d, want %d", dashboardBans, n, before+dashboardBans)
	}
	b.do("the bans page", chromedp.Navigate(base+"/?big#bans"), chromedp.WaitVisible(chromedp.CSS("#page-bans")))
	b.wait("the first page", `document.body.dataset.bansLoaded !== undefined`)
	first := b.loadBans("list again", chromedp.Click(chromedp.CSS("#ban-search button[type=submit]")))
	want := fmt.Sprintf("1–50 of %s", thousands(before+dashboardBans))
	if count := eval[string](b, `document.querySelector("#bans-count").textContent`); count != want {
		t.Fatalf("bans page of %d bans = %q, want %q", before+dashboardBans, count, want)
	}
	next := b.loadBans("the next page", chromedp.Click(chromedp.CSS("#bans-next")))
	search := b.loadBans("search 10.1.2.", chromedp.Steps(
		chromedp.SetValue(chromedp.CSS("#bans-q"), "10.1.2."),
		chromedp.Click(chromedp.CSS("#ban-search button[type=submit]"))))
	if count := eval[string](b, `document.querySelector("#bans-count").textContent`); count != "1–50 of 256" {
		t.Fatalf("bans page searched for 10.1.2. = %q, want 1–50 of 256", count)
	}
	address := b.loadBans("search 10.1.2.3", chromedp.Steps(
		chromedp.SetValue(chromedp.CSS("#bans-q"), "10.1.2.3"),
		chromedp.Click(chromedp.CSS("#ban-search button[type=submit]"))))
	if count := eval[string](b, `document.querySelector("#bans-count").textContent`); count != "1–1 of 1" {
		t.Fatalf("bans page searched for 10.1.2.3 = %q, want 1–1 of 1", count)
	}
	within := b.loadBans("search 10.1.0.0/16", chromedp.Steps(
		chromedp.SetValue(chromedp.CSS("#bans-q"), "10.1.0.0/16"),
		chromedp.Click(chromedp.CSS("#ban-search button[type=submit]"))))
	if count := eval[string](b, `document.querySelector("#bans-count").textContent`); count != "1–50 of 34,464" {
		t.Fatalf("bans page searched for 10.1.0.0/16 = %q, want 1–50 of 34,464 (10.1.0.0 to 10.1.134.159)", count)
	}
	sorted := b.loadBans("sort by key", chromedp.Click(chromedp.CSS(`button.sort[data-sort="key"]`)))
	t.Logf("%d bans on Redis, in chromium: first page %v, next page %v, search \"10.1.2.\" %v, address 10.1.2.3 %v, within 10.1.0.0/16 %v, sorted by key %v",
		before+dashboardBans, first.Round(time.Millisecond), next.Round(time.Millisecond), search.Round(time.Millisecond),
		address.Round(time.Millisecond), within.Round(time.Millisecond), sorted.Round(time.Millisecond))
	b.shot("bans-100k")

	// The events page reads the journal from its start, every ban of the
	// bulk load, before it follows it.
	ctlRedis("ban", "-for", "10m", "-reason", "after the bulk load", "203.0.113.123")
	start = time.Now()
	b.do("the events page", chromedp.Navigate(base+"/?big#events"), chromedp.WaitVisible(chromedp.CSS("#page-events")))
	b.wait("the ban after the bulk load", `document.querySelector('#events-table tr[data-kind="ban"][data-key="203.0.113.123"]') !== null`)
	t.Logf("events page: the journal of %d bans read to its end in %v", before+dashboardBans+1, time.Since(start).Round(time.Millisecond))
}

// thousands writes n with commas, as the page does.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// fillBans writes n bans of 10.0.0.0/8 addresses into the Redis at
// redisURL, as protectd's protector would, from a few goroutines.
func fillBans(t *testing.T, redisURL string, n int) {
	t.Helper()
	st, err := redisstore.Dial(redisURL, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := protect.New(protect.Config{Store: st, StoreTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				addr := fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)
				if _, err := p.Ban(context.Background(), addr, protect.BanOptions{For: time.Duration(1+i%48) * time.Hour, Reason: "bulk " + strconv.Itoa(i%7)}); err != nil {
					errs <- fmt.Errorf("ban %s: %w", addr, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// traffic sends /verify a mix of requests for d, for the now page's
// picture: new clients served at a rate that swells and ebbs, one
// client past its limit, one banned, one on the block list.
func traffic(t *testing.T, ask func(client string) int, d time.Duration) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for n, end := 0, time.Now().Add(d); time.Now().Before(end); n++ {
		<-tick.C
		served := 1 + (n/20)%4 + (n/7)%2 // 1 to 5 new clients a tick
		for i := range served {
			ask(fmt.Sprintf("10.200.%d.%d", (n*5+i)>>8&255, (n*5+i)&255))
		}
		if n%3 == 0 {
			ask("203.0.113.44") // past its limit
		}
		if n%8 == 0 {
			ask("203.0.113.8") // banned from the page
		}
		if n%10 == 5 {
			ask("100.64.1.1") // on the block list
		}
	}
}
