package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// clock is a fake clock, so that bans end without waiting.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newSite(t *testing.T) (http.Handler, *protect.Protector, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	cfg := guardConfig(slog.New(slog.DiscardHandler))
	cfg.Clock = clk.Now
	guard, err := protect.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { guard.Close() })
	return newHandler(guard), guard, clk
}

type result struct {
	code       int
	body       string
	retryAfter string
}

func post(h http.Handler, peer, password string) result {
	form := url.Values{"user": {"demo"}, "password": {password}}
	r := httptest.NewRequest("POST", "/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = peer
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return result{w.Code, strings.TrimSpace(w.Body.String()), w.Header().Get("Retry-After")}
}

func get(h http.Handler, peer, path string) int {
	r := httptest.NewRequest("GET", path, nil)
	r.RemoteAddr = peer
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// codes sends n logins and returns the status codes, space-separated.
func codes(h http.Handler, peer, password string, n int) string {
	var out []string
	for range n {
		out = append(out, fmt.Sprint(post(h, peer, password).code))
	}
	return strings.Join(out, " ")
}

func TestSuccessesNeverCount(t *testing.T) {
	h, guard, _ := newSite(t)
	const peer = "192.0.2.10:5000"
	for i := range 100 {
		if got := post(h, peer, demoPassword); got.code != 200 || got.body != "welcome, demo" {
			t.Fatalf("post(%s, the demo password) %d = %+v, want 200 \"welcome, demo\"", peer, i+1, got)
		}
	}
	// Four failures among them leave one to spare.
	if got := codes(h, peer, "guess", 4); got != "401 401 401 401" {
		t.Fatalf("codes(%s, guess, 4) = %s, want 4 × 401", peer, got)
	}
	if got := post(h, peer, demoPassword); got.code != 200 {
		t.Fatalf("post(%s, the demo password) after 4 failures = %+v, want 200", peer, got)
	}
	bans, err := admin.New(guard).Bans(t.Context(), admin.Filter{})
	if err != nil || len(bans) != 0 {
		t.Fatalf("guard.Bans() = %+v, %v; want none", bans, err)
	}
}

func TestFailuresLimitThenBan(t *testing.T) {
	h, guard, clk := newSite(t)
	const peer = "198.51.100.23:40000"
	if got := codes(h, peer, "guess", 5); got != "401 401 401 401 401" {
		t.Fatalf("codes(%s, guess, 5) = %s, want 5 × 401", peer, got)
	}
	// Out of attempts: the right password is refused too.
	got := post(h, peer, demoPassword)
	if got.code != 429 || got.retryAfter != "900" || !strings.Contains(got.body, `"code":"rate_limited"`) {
		t.Fatalf("post(%s, the demo password) after 5 failures = %+v, want 429 rate_limited, Retry-After 900", peer, got)
	}
	// Each refused attempt counts: 6 … 20 are refused, the 21st bans.
	if got := codes(h, peer, demoPassword, 14); got != strings.TrimSpace(strings.Repeat("429 ", 14)) {
		t.Fatalf("codes(%s, the demo password, 14), attempts 7-20 = %s, want 14 × 429", peer, got)
	}
	if got := post(h, peer, demoPassword); got.code != 403 || got.retryAfter != "3600" {
		t.Fatalf("post(%s), attempt 21 = %+v, want 403, Retry-After 3600", peer, got)
	}
	// Only the login is guarded: the site is still readable; the form is not.
	if code := get(h, peer, "/"); code != 200 {
		t.Fatalf("get(%s, /) while banned = %d, want 200: only the login is guarded", peer, code)
	}
	if code := get(h, peer, "/login"); code != 403 {
		t.Fatalf("get(%s, /login) while banned = %d, want 403", peer, code)
	}
	// Another client is untouched.
	if got := post(h, "198.51.100.24:1", demoPassword); got.code != 200 {
		t.Fatalf("post(198.51.100.24, the demo password), another client = %+v, want 200", got)
	}
	bans, err := admin.New(guard).Bans(t.Context(), admin.Filter{})
	if err != nil || len(bans) != 1 || bans[0].Key.String() != "198.51.100.23" || bans[0].Reason != "failures passed the ban limit of 20" {
		t.Fatalf("guard.Bans() = %+v, %v; want one of 198.51.100.23 for passing the ban limit of 20", bans, err)
	}
	// The ban ends after an hour; the next one, within the offense window,
	// lasts two.
	clk.Advance(time.Hour)
	if got := post(h, peer, demoPassword); got.code != 200 {
		t.Fatalf("post(%s, the demo password) after the ban = %+v, want 200", peer, got)
	}
	codes(h, peer, "guess", 21)
	if got := post(h, peer, demoPassword); got.code != 403 || got.retryAfter != "7200" {
		t.Fatalf("post(%s) in the second ban = %+v, want 403, Retry-After 7200", peer, got)
	}
}

// Failures are forgotten after a 15-minute pause.
func TestPauseForgives(t *testing.T) {
	h, _, clk := newSite(t)
	const peer = "203.0.113.5:1"
	codes(h, peer, "guess", 5)
	clk.Advance(14 * time.Minute)
	if got := post(h, peer, demoPassword); got.code != 429 {
		t.Fatalf("post(%s) 14 minutes later = %+v, want 429", peer, got)
	}
	clk.Advance(15 * time.Minute) // the refused attempt counted: 15 minutes from it
	if got := post(h, peer, demoPassword); got.code != 200 {
		t.Fatalf("post(%s) after the pause = %+v, want 200", peer, got)
	}
}

func TestRunPrintsHowToProbe(t *testing.T) {
	var out strings.Builder
	if err := run("127.0.0.1:-1", &out, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("run(127.0.0.1:-1) = nil, want an error for a bad address")
	}
	if !strings.Contains(out.String(), "curl -i -d user=demo") {
		t.Fatalf("run(127.0.0.1:-1) printed\n%s\nwant the curl -d user=demo example", out.String())
	}
}
