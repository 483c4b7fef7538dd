package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is the fake clock the story runs on: no sleeps.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

type response struct {
	code               int
	retryAfter, policy string
	rateLimit          string
	problem            struct {
		Code       string `json:"code"`
		Policy     string `json:"policy"`
		RetryAfter int64  `json:"retry_after"`
	}
}

func newStory(t *testing.T) (func(path, key, peer string) response, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	h, closeAll, err := newHandler(clk.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeAll)
	send := func(path, key, peer string) response {
		t.Helper()
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = peer
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		res := response{code: w.Code, retryAfter: w.Header().Get("Retry-After"), policy: strings.Join(w.Header().Values("RateLimit-Policy"), ", "), rateLimit: strings.Join(w.Header().Values("RateLimit"), ", ")}
		if w.Header().Get("Content-Type") == "application/problem+json" {
			if err := json.Unmarshal(w.Body.Bytes(), &res.problem); err != nil {
				t.Fatalf("json.Unmarshal(problem body %q) = %v", w.Body, err)
			}
		}
		return res
	}
	return send, clk
}

// The article's story: Acme's two keys and three machines share one
// bucket; Globex on Acme's address is not punished for it; the 429 says
// when to come back.
func TestAcmeSharesOneBucket(t *testing.T) {
	send, clk := newStory(t)
	peers := []string{"192.0.2.10:4000", "198.51.100.20:4000", "203.0.113.30:4000"}
	var codes []string
	var last response
	for i := range 12 {
		last = send("/v1/things", fmt.Sprintf("key_acme_%d", i%2+1), peers[i%3])
		codes = append(codes, strconv.Itoa(last.code))
	}
	if got := strings.Join(codes, " "); got != strings.TrimSpace(strings.Repeat("200 ", 10)+"429 429") {
		t.Fatalf("send(/v1/things, acme) × 12 = %s, want 10 served (pro's burst), then 429", got)
	}
	if last.retryAfter != "1" || last.problem.Code != "rate_limited" || last.problem.Policy != "burst" ||
		// The gate's item and the plan's, each protector's own.
		last.policy != `"addr";q=20;w=10, "burst";q=5;w=1, "monthly";q=100000;w=2592000` ||
		!strings.HasPrefix(last.rateLimit, `"addr";r=`) || !strings.Contains(last.rateLimit, `, "burst";r=0;t=1, "monthly";r=99990;t=`) {
		t.Fatalf("send(/v1/things, acme), the 429 = %+v, want the addr, burst and monthly policies, burst r=0", last)
	}
	// Globex, behind the same address as Acme's first machine, has its own
	// bucket: free's burst of 5.
	for i := range 5 {
		if r := send("/v1/things", "key_globex", peers[0]); r.code != 200 {
			t.Fatalf("send(/v1/things, key_globex) request %d = %d, want 200", i+1, r.code)
		}
	}
	// A second later Acme has one token back (5 a second is one per 0.2s:
	// five tokens).
	clk.Advance(time.Second)
	served := 0
	for range 7 {
		if send("/v1/things", "key_acme_1", peers[1]).code == 200 {
			served++
		}
	}
	if served != 5 {
		t.Fatalf("send(/v1/things, key_acme_1) × 7 a second later = %d served, want 5", served)
	}
}

// A monthly quota: Globex's 100 are used up, the 101st is 429
// quota_exceeded with a Retry-After to the first of next month (the
// client must not retry), and December serves again.
func TestQuotaExceeded(t *testing.T) {
	send, clk := newStory(t)
	for i := range 100 {
		clk.Advance(11 * time.Second) // a pause past the gate's TTL, and a token back
		if r := send("/v1/things", "key_globex", "192.0.2.10:4000"); r.code != 200 {
			t.Fatalf("send(/v1/things, key_globex) request %d = %d %+v, want 200", i+1, r.code, r)
		}
	}
	clk.Advance(11 * time.Second)
	r := send("/v1/things", "key_globex", "192.0.2.10:4000")
	wait := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Sub(clk.Now())
	if r.code != 429 || r.problem.Code != "quota_exceeded" || r.problem.Policy != "monthly" || r.retryAfter != strconv.FormatInt(int64(wait/time.Second), 10) {
		t.Fatalf("send(/v1/things, key_globex) request 101 = %+v, want 429 quota_exceeded, Retry-After %v", r, wait)
	}
	// The client rule: a Retry-After above a minute is not worth waiting
	// for in a request; a rate_limited one is.
	if secs, _ := strconv.Atoi(r.retryAfter); secs <= 60 {
		t.Fatalf("Retry-After of the quota refusal = %d, want days, not seconds", secs)
	}
	clk.Advance(wait)
	if r := send("/v1/things", "key_globex", "192.0.2.10:4000"); r.code != 200 || !strings.Contains(r.rateLimit, `"monthly";r=99;`) {
		t.Fatalf("send(/v1/things, key_globex) on the first of December = %+v, want 200, monthly r=99", r)
	}
}

// Unknown keys get 401 and never reach the plans; the address gate in
// front of authentication stops key guessing; /health is never limited.
func TestGateAndHealth(t *testing.T) {
	send, _ := newStory(t)
	var codes []string
	for range 25 {
		codes = append(codes, strconv.Itoa(send("/v1/things", "guess", "203.0.113.66:5000").code))
	}
	if got := strings.Join(codes, " "); got != strings.TrimSpace(strings.Repeat("401 ", 20)+strings.Repeat("429 ", 5)) {
		t.Fatalf("codes of guessed keys = %s, want 20 × 401, then the gate's 429", got)
	}
	for range 50 {
		if r := send("/health", "", "203.0.113.66:5000"); r.code != http.StatusOK || r.rateLimit != "" {
			t.Fatalf("send(/health) from a limited address = %+v, want 200 without RateLimit", r)
		}
	}
}
