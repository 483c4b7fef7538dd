package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const (
	proxy   = "10.0.0.1:5555" // the trusted proxy, as protectd's peer
	trusted = "HTTP_PROTECT_TRUSTED_PROXIES=10.0.0.0/8"
	plans   = `HTTP_PROTECT_PLANS={"pro": {"rates": [{"name": "burst", "limit": 2, "period": "1m"}],
		"quotas": [{"name": "monthly", "limit": 1000, "period": "monthly"}]}}`
)

// TestVerifyExactCounts: 300 requests of one client through a trusted
// proxy give exactly 100 served, 150 limited and 50 banned, each with its
// status, fields and (when refused) one log line.
func TestVerifyExactCounts(t *testing.T) {
	h, logs := testVerifier(t, trusted, "HTTP_PROTECT_MAX_REQUESTS=100", "HTTP_PROTECT_BAN_LIMIT=250", "HTTP_PROTECT_TTL=1h")
	counts := map[int]int{}
	for i := range 300 {
		w := ask(h, "GET", "/verify", proxy, "X-Forwarded-For", "203.0.113.7", "X-Original-URI", "/login?x=1", "X-Original-Method", "POST")
		counts[w.Code]++
		res := w.Result()
		if got := res.Header.Get(hdrStatus); got != itoa(w.Code) {
			t.Fatalf("GET /verify #%d = %d, %s %q; want %s %q, the status", i+1, w.Code, hdrStatus, got, hdrStatus, itoa(w.Code))
		}
		if got := res.Header.Get(hdrKey); got != "203.0.113.7" {
			t.Fatalf("GET /verify #%d = %s %q, want 203.0.113.7", i+1, hdrKey, got)
		}
		switch {
		case i < 100:
			if w.Code != 200 || res.Header.Get("RateLimit") != `"protect";r=`+itoa(99-i)+";t=3600" || w.Body.Len() != 0 {
				t.Fatalf("GET /verify #%d = %d, RateLimit %q, body %q; want 200, RateLimit %q, no body", i+1, w.Code, res.Header.Get("RateLimit"), w.Body, `"protect";r=`+itoa(99-i)+";t=3600")
			}
		case i < 250:
			if w.Code != 429 || res.Header.Get("Retry-After") != "3600" || res.Header.Get(hdrCode) != "rate_limited" ||
				res.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("GET /verify #%d = %d %v, want 429 rate_limited, Retry-After 3600, application/problem+json", i+1, w.Code, res.Header)
			}
		default:
			if w.Code != 403 || res.Header.Get("Retry-After") != "3600" || res.Header.Get(hdrCode) != "banned" {
				t.Fatalf("GET /verify #%d = %d %v, want 403 banned, Retry-After 3600", i+1, w.Code, res.Header)
			}
		}
		if res.Header.Get("RateLimit-Policy") != `"protect";q=100;w=3600` {
			t.Fatalf("GET /verify #%d = RateLimit-Policy %q, want %q", i+1, res.Header.Get("RateLimit-Policy"), `"protect";q=100;w=3600`)
		}
	}
	if counts[200] != 100 || counts[429] != 150 || counts[403] != 50 {
		t.Fatalf("300 × GET /verify = statuses %v, want 100 × 200, 150 × 429, 50 × 403", counts)
	}
	refused := logs.lines(t, "refused")
	if len(refused) != 200 {
		t.Fatalf("log lines refused = %d, want 200", len(refused))
	}
	first := refused[0]
	for k, want := range map[string]any{"status": 429.0, "decision": "limited", "code": "rate_limited", "client": "203.0.113.7",
		"key": "203.0.113.7", "retry_after": 3600.0, "method": "POST", "uri": "/login?x=1", "level": "INFO"} {
		if first[k] != want {
			t.Errorf("first refused log line[%q] = %v, want %v (%v)", k, first[k], want, first)
		}
	}
	if last := refused[199]; last["decision"] != "banned" || last["status"] != 403.0 {
		t.Errorf("last refused log line = %v, want decision banned, status 403", last)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestVerifyTrust: forwarding and consumer headers are believed from the
// trusted proxy only.
func TestVerifyTrust(t *testing.T) {
	for _, tc := range []struct {
		name    string
		peer    string
		header  []string
		code    int
		key     string
		problem string // the code of a refusal
	}{
		{"direct client's forged X-Forwarded-For is ignored", "198.51.100.9:4000",
			[]string{"X-Forwarded-For", "203.0.113.7"}, 200, "198.51.100.9", ""},
		{"proxy's X-Forwarded-For is read right to left", proxy,
			[]string{"X-Forwarded-For", "6.6.6.6, 203.0.113.7"}, 200, "203.0.113.7", ""},
		{"proxy without a forwarding header: the proxy itself", proxy, nil, 200, "10.0.0.1", ""},
		{"proxy with garbage in the forwarding header: unknown client", proxy,
			[]string{"X-Forwarded-For", "203.0.113.7, garbage"}, 429, "", "unknown_client"},
		{"proxy names a consumer under a known plan", proxy,
			[]string{"X-Forwarded-For", "203.0.113.7", hdrConsumer, "acme", hdrPlan, "pro"}, 200, "acme", ""},
		{"direct client naming a consumer is counted by address", "198.51.100.9:4000",
			[]string{hdrConsumer, "acme", hdrPlan, "pro"}, 200, "198.51.100.9", ""},
		{"direct client naming an unknown plan is counted by address", "198.51.100.9:4000",
			[]string{hdrConsumer, "acme", hdrPlan, "gold"}, 200, "198.51.100.9", ""},
		{"proxy names an unknown plan", proxy,
			[]string{"X-Forwarded-For", "203.0.113.7", hdrConsumer, "acme", hdrPlan, "gold"}, 503, "", "unknown_plan"},
		{"proxy names a consumer without a plan", proxy,
			[]string{"X-Forwarded-For", "203.0.113.7", hdrConsumer, "acme"}, 503, "", "unknown_plan"},
		{"a plan without a consumer counts the address", proxy,
			[]string{"X-Forwarded-For", "203.0.113.7", hdrPlan, "gold"}, 200, "203.0.113.7", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := testVerifier(t, trusted, plans)
			w := ask(h, "GET", "/verify", tc.peer, tc.header...)
			if w.Code != tc.code || w.Header().Get(hdrKey) != tc.key || w.Header().Get(hdrCode) != tc.problem {
				t.Fatalf("GET /verify from %s with %q = %d, key %q, code %q; want %d %q %q; body %s", tc.peer, tc.header, w.Code, w.Header().Get(hdrKey),
					w.Header().Get(hdrCode), tc.code, tc.key, tc.problem, w.Body)
			}
			if tc.problem != "" {
				var body struct {
					Status int    `json:"status"`
					Code   string `json:"code"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Status != tc.code || body.Code != tc.problem {
					t.Fatalf("GET /verify from %s with %q = body %s (%v), want problem+json of status %d, code %q", tc.peer, tc.header, w.Body, err, tc.code, tc.problem)
				}
			}
		})
	}
}

// TestVerifyConsumerPlan: a consumer named by the proxy is held to its
// plan, with the plan's fields, and refused once a rate runs out.
func TestVerifyConsumerPlan(t *testing.T) {
	h, logs := testVerifier(t, trusted, plans)
	hdr := []string{"X-Forwarded-For", "203.0.113.7", hdrConsumer, "acme", hdrPlan, "pro"}
	for i, want := range []int{200, 200, 429} {
		w := ask(h, "GET", "/verify", proxy, hdr...)
		if w.Code != want {
			t.Fatalf("GET /verify #%d as consumer acme on plan pro = %d, want %d", i+1, w.Code, want)
		}
		if got := w.Header().Get("RateLimit-Policy"); got != `"burst";q=2;w=60, "monthly";q=1000;w=2592000` {
			t.Fatalf("GET /verify #%d as consumer acme on plan pro = RateLimit-Policy %q, want %q", i+1, got, `"burst";q=2;w=60, "monthly";q=1000;w=2592000`)
		}
	}
	// Another address, same consumer: the plan is the consumer's.
	hdr[1] = "198.51.100.1"
	if w := ask(h, "GET", "/verify", proxy, hdr...); w.Code != 429 || w.Header().Get(hdrCode) != "rate_limited" {
		t.Fatalf("GET /verify as consumer acme from 198.51.100.1 = %d %v, want 429 rate_limited: the plan is the consumer's", w.Code, w.Header())
	}
	if l := logs.lines(t, "refused"); len(l) != 2 || l[0]["key"] != "acme" || l[0]["policy"] != "burst" {
		t.Fatalf("log lines refused = %v, want 2, the first of key acme, policy burst", l)
	}
}

// TestVerifyUnknownPlanLogs: an unknown plan is an error in the log that
// names it.
func TestVerifyUnknownPlanLogs(t *testing.T) {
	h, logs := testVerifier(t, trusted, plans)
	ask(h, "GET", "/verify", proxy, "X-Forwarded-For", "203.0.113.7", hdrConsumer, "acme", hdrPlan, "gold")
	l := logs.lines(t, "refused")
	if len(l) != 1 || l[0]["level"] != "ERROR" || l[0]["plan"] != "gold" || l[0]["code"] != "unknown_plan" {
		t.Fatalf("log lines refused = %v, want one ERROR of plan gold, code unknown_plan", l)
	}
}

// TestVerifyUnknownPlanDryRun: a dry run refuses nothing, an unknown plan
// included; it is logged as a dry run's refusal.
func TestVerifyUnknownPlanDryRun(t *testing.T) {
	h, _ := testVerifier(t, trusted, plans, "HTTP_PROTECT_DRY_RUN=true")
	w := ask(h, "GET", "/verify", proxy, "X-Forwarded-For", "203.0.113.7", hdrConsumer, "acme", hdrPlan, "gold")
	if w.Code != 200 || w.Header().Get(hdrStatus) != "200" {
		t.Fatalf("GET /verify in a dry run, plan gold = %d %v, want 200, %s 200", w.Code, w.Header(), hdrStatus)
	}
}

// TestVerifyRefusalStatus: a proxy that understands only 401 and 403
// (nginx) gets refusals as asked, the real status, code and body in
// headers.
func TestVerifyRefusalStatus(t *testing.T) {
	for _, tc := range []struct {
		ask, want int
	}{{403, 403}, {401, 401}, {0, 429}, {500, 429}} {
		h, _ := testVerifier(t, trusted, "HTTP_PROTECT_MAX_REQUESTS=1")
		hdr := []string{"X-Forwarded-For", "203.0.113.7"}
		if tc.ask != 0 {
			hdr = append(hdr, hdrRefusalStatus, itoa(tc.ask))
		}
		if w := ask(h, "GET", "/verify", proxy, hdr...); w.Code != 200 || w.Header().Get(hdrProblem) != "" {
			t.Fatalf("first GET /verify asking %d = %d %v, want 200 without %s", tc.ask, w.Code, w.Header(), hdrProblem)
		}
		w := ask(h, "GET", "/verify", proxy, hdr...)
		if w.Code != tc.want || w.Header().Get(hdrStatus) != "429" || w.Header().Get("Retry-After") != "10" ||
			w.Header().Get("RateLimit") != `"protect";r=0;t=10` {
			t.Fatalf("second GET /verify asking %d = %d %v; want %d, %s 429, Retry-After 10, RateLimit r=0;t=10", tc.ask, w.Code, w.Header(), tc.want, hdrStatus)
		}
		problem := w.Header().Get(hdrProblem)
		if tc.want == 429 {
			if problem != "" {
				t.Fatalf("second GET /verify asking %d = %s %q, want none", tc.ask, hdrProblem, problem)
			}
			continue
		}
		if problem != strings.TrimSpace(w.Body.String()) || !strings.Contains(problem, `"status":429,"code":"rate_limited"`) {
			t.Fatalf("second GET /verify asking %d = %s %q, body %q; want the body, of status 429, code rate_limited", tc.ask, hdrProblem, problem, w.Body)
		}
	}
}

// TestVerifyPaths: /verify takes any method and any path below it
// (Envoy appends the original path) without redirects; other paths are
// not /verify.
func TestVerifyPaths(t *testing.T) {
	h, logs := testVerifier(t, trusted, "HTTP_PROTECT_MAX_REQUESTS=1")
	for _, tc := range []struct {
		method, target string
		code           int
	}{
		{"GET", "/verify", 200},
		{"DELETE", "/verify//a/../b?q=1", 429},
		{"PATCH", "/verify/x", 429},
		{"GET", "/healthz", 200},
		{"POST", "/healthz", 405},
		{"GET", "/verifyx", 404},
		{"GET", "/", 404},
	} {
		if w := ask(h, tc.method, tc.target, proxy, "X-Forwarded-For", "203.0.113.7"); w.Code != tc.code {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.target, w.Code, tc.code)
		}
	}
	l := logs.lines(t, "refused")
	if len(l) != 2 || l[0]["method"] != "DELETE" || l[0]["uri"] != "//a/../b?q=1" {
		t.Fatalf("log lines refused = %v, want 2, the first of DELETE //a/../b?q=1", l)
	}
}

// TestVerifyLogsClipped: headers the proxy reports are cut before they
// reach the log.
func TestVerifyLogsClipped(t *testing.T) {
	h, logs := testVerifier(t, trusted, "HTTP_PROTECT_MAX_REQUESTS=1")
	long := "/" + strings.Repeat("a", 5000)
	for range 2 {
		ask(h, "GET", "/verify", proxy, "X-Forwarded-For", "203.0.113.7", "X-Forwarded-Uri", long)
	}
	l := logs.lines(t, "refused")
	if len(l) != 1 || len(l[0]["uri"].(string)) > maxLogged+len("…") {
		t.Fatalf("log lines refused = %v, want 1, its uri cut to %d bytes and …", l, maxLogged)
	}
}

// TestVerifyStoreDownHidesError: a dead Redis is a 503 (FailClosed)
// whose body and headers say nothing of the store; the log has it.
func TestVerifyStoreDownHidesError(t *testing.T) {
	h, logs := testVerifier(t, trusted, "HTTP_PROTECT_REDIS_URL=redis://127.0.0.1:1/0", "HTTP_PROTECT_ON_STORE_ERROR=closed")
	w := ask(h, "GET", "/verify", proxy, "X-Forwarded-For", "203.0.113.7")
	if w.Code != 503 || w.Header().Get(hdrCode) != "unavailable" {
		t.Fatalf("GET /verify with the store down = %d %v, want 503 unavailable", w.Code, w.Header())
	}
	for _, leak := range []string{"127.0.0.1:1", "refused", "dial"} {
		if strings.Contains(w.Body.String(), leak) || strings.Contains(flatten(w.Header()), leak) {
			t.Fatalf("GET /verify with the store down = %v %s, want nothing saying %q", w.Header(), w.Body, leak)
		}
	}
	if l := logs.lines(t, "refused"); len(l) != 1 || l[0]["err"] == nil {
		t.Fatalf("log lines refused = %v, want 1 with the store's err", l)
	}
}

func flatten(h map[string][]string) string {
	var b strings.Builder
	for k, v := range h {
		b.WriteString(k + ": " + strings.Join(v, ",") + "\n")
	}
	return b.String()
}

// TestMetrics: /metrics counts protectd's decisions.
func TestMetrics(t *testing.T) {
	h, _ := testVerifier(t, trusted, "HTTP_PROTECT_MAX_REQUESTS=1")
	for range 3 {
		ask(h, "GET", "/verify", proxy, "X-Forwarded-For", "203.0.113.7")
	}
	w := ask(h, "GET", "/metrics", proxy)
	body := w.Body.String()
	for _, want := range []string{
		`protect_decisions_total{namespace="protect:",status="allowed"} 1`,
		`protect_decisions_total{namespace="protect:",status="limited"} 2`,
		`go_goroutines `,
	} {
		if w.Code != 200 || !strings.Contains(body, want) {
			t.Fatalf("GET /metrics = %d\n%s\nwant 200 and %q", w.Code, body, want)
		}
	}
}
