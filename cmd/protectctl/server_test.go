package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/redisstore"
	"github.com/redis/go-redis/v9"
)

// memService is a service on the memory store serving admin.Handler on
// a loopback port, with its protectors in the order given.
type memService struct {
	ps  []*protect.Protector
	url string
}

func newMemService(t *testing.T, clock func() time.Time, cfgs ...protect.Config) *memService {
	t.Helper()
	store := protect.NewMemoryStore(protect.MemoryOptions{Clock: clock})
	ms := &memService{}
	for _, cfg := range cfgs {
		cfg.Store, cfg.Clock, cfg.Logger = store, clock, slog.New(slog.DiscardHandler)
		p, err := protect.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ms.ps = append(ms.ps, p)
	}
	srv := httptest.NewServer(admin.Handler(ms.ps...))
	ms.url = srv.URL
	t.Cleanup(func() {
		srv.Close()
		for _, p := range ms.ps {
			p.Close()
		}
		store.Close()
	})
	return ms
}

// ctlServer runs protectctl in-process through the admin API at url.
func ctlServer(t *testing.T, url string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	code = run(append([]string{"-server", url}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

var (
	rfc3339   = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	durations = regexp.MustCompile(`\b(\d+d)?(\d+h)?(\d+m)?\d+(\.\d+)?s\b|\b\d+d\b`)
	spaces    = regexp.MustCompile(` +`)
	leftJSON  = regexp.MustCompile(`"(seconds_left|count_seconds_left|reset_ms)": \d+`)
)

// normalize blanks what two stores' clocks tell apart (times, times
// left, the table widths they make): the rest must be the same.
func normalize(s string) string {
	s = rfc3339.ReplaceAllString(s, "TIME")
	s = leftJSON.ReplaceAllString(s, `"$1": N`)
	s = durations.ReplaceAllString(s, "DUR")
	return spaces.ReplaceAllString(s, " ")
}

// Over admin.Handler on a memory store, every command prints what it
// prints on Redis: the same service, the same bans, the same tables and
// the same -json, the same errors with the same exit status.
func TestServerMatchesRedis(t *testing.T) {
	for name, mk := range servers(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			// On Redis, the tool reads the service's environment.
			t.Setenv("HTTP_PROTECT_SAFE_NETWORKS", "192.0.2.128/25")
			cfg := protect.Config{MaxRequests: 2, BanLimit: 3, SafeNetworks: []string{"192.0.2.128/25"}}
			red := newService(t, s, cfg)
			mcfg := cfg
			mcfg.Namespace, mcfg.BanNamespace = s.ns, s.ns
			// Real time, as Redis keeps it: bans are listed in the order of their
			// expiry, which the two stores must tell alike.
			mem := newMemService(t, time.Now, mcfg)
			const plans = `{"free": {"quotas": [{"name": "monthly", "limit": 100, "period": "monthly"}]}}`
			free, _ := protect.NewPlan("free", protect.Quota{Name: "monthly", Limit: 100, Period: protect.Monthly})
			for _, p := range []*protect.Protector{red.p, mem.ps[0]} {
				for range 3 {
					p.VerifyConsumer(t.Context(), "acme", free)
				}
				for range 4 {
					p.VerifyAddr(t.Context(), netip.MustParseAddr("203.0.113.7"))
				}
				p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1"))
				if err := p.Publish(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			steps := []struct {
				args []string
				code int
			}{
				{[]string{"ban", "-for", "2h", "-reason", "scanner", "-by", "bob@ops", "198.51.100.0/24"}, 0},
				{[]string{"ban", "-json", "-permanent", "-by", "bob@ops", "-reason", "fraud", "consumer:cus_fraud"}, 0},
				{[]string{"ban", "-json", "-by", "bob@ops", "192.0.2.200"}, 0},
				{[]string{"bans"}, 0},
				{[]string{"bans", "-json"}, 0},
				{[]string{"bans", "-json", "-within", "198.51.0.0/16", "-source", "manual"}, 0},
				{[]string{"bans", "-source", "auto"}, 0},
				{[]string{"bans", "-json", "-limit", "1"}, 0},
				{[]string{"inspect", "198.51.100.7"}, 0},
				{[]string{"inspect", "-json", "203.0.113.7"}, 0},
				{[]string{"inspect", "-json", "192.0.2.1"}, 0},
				{[]string{"inspect", "consumer:cus_fraud"}, 0},
				{[]string{"inspect", "-plans", plans, "consumer:acme"}, 0},
				{[]string{"inspect", "-json", "-plans", plans, "-plan", "free", "consumer:acme"}, 0},
				{[]string{"explain", "-remote", "198.51.100.7:1234"}, 0},
				{[]string{"explain", "-json", "-remote", "192.0.2.1:1234", "-H", "X-Forwarded-For: 6.6.6.6"}, 0},
				{[]string{"explain", "-json", "-remote", "203.0.113.7:1234"}, 0},
				{[]string{"check", "203.0.113.7"}, 1},
				{[]string{"check", "-json", "198.51.100.7"}, 1},
				{[]string{"check", "192.0.2.1"}, 0},
				{[]string{"check", "-json", "192.0.2.200"}, 0}, // banned, but safe first
				{[]string{"protectors", "-json"}, 0},
				{[]string{"protectors"}, 0},
				{[]string{"ban", "garbage"}, 2},
				{[]string{"ban", "0.0.0.0/0"}, 2},
				{[]string{"lift", "not-an-address"}, 2},
				{[]string{"lift", "::ffff:0:0/96"}, 2},
				{[]string{"check", "198.51.100.0/24"}, 2},
				{[]string{"inspect", "nonsense"}, 2},
				{[]string{"lift", "-by", "alice@ops", "203.0.113.7"}, 0},
				{[]string{"lift", "-json", "-by", "alice@ops", "198.51.0.0/16"}, 0},
				{[]string{"lift", "-json", "203.0.113.7"}, 0},
				{[]string{"check", "203.0.113.7"}, 0},
				{[]string{"bans", "-json"}, 0},
				{[]string{"lift", "-json", "-all"}, 0},
				{[]string{"bans", "-json"}, 0},
			}
			for _, st := range steps {
				rc, rout, rerr := ctl(t, s, st.args...)
				sc, sout, serr := ctlServer(t, mem.url, append([]string{"-namespace", s.ns}, st.args...)...)
				if rc != st.code || sc != st.code {
					t.Fatalf("protectctl %q = exit %d on Redis (%s), %d through the admin API (%s); want %d", st.args, rc, rerr, sc, serr, st.code)
				}
				if normalize(rout) != normalize(sout) {
					t.Errorf("protectctl %q stdout differs: on Redis\n%s\nthrough the admin API\n%s", st.args, rout, sout)
				}
				if st.code == 2 && rerr != serr {
					t.Errorf("protectctl %q stderr differs: on Redis\n%s\nthrough the admin API\n%s", st.args, rerr, serr)
				}
			}
			// The lifts through the API hold on the very next request.
			if d, _ := mem.ps[0].VerifyAddr(t.Context(), netip.MustParseAddr("203.0.113.7")); d.Status != protect.Allowed {
				t.Fatalf("VerifyAddr(203.0.113.7) right after the lift through the admin API = %v, want allowed", d.Status)
			}
		})
	}
}

// The admin API answers with exact statuses and problem codes, quotes bad
// input, and the JSON of each path holds exactly the schema's fields.
func TestHandlerStatuses(t *testing.T) {
	mem := newMemService(t, (&fakeClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}).Now, protect.Config{})
	ctx := t.Context()
	mem.ps[0].Ban(ctx, "203.0.113.7", protect.BanOptions{For: time.Hour, Reason: "scanner", By: "bob"})
	tests := []struct {
		method, path, body string
		status             int
		code               string // the problem's; "" for a record
		says               string
	}{
		{"GET", "/v1/bans", "", 200, "", `"key": "203.0.113.7"`},
		{"GET", "/v1/bans?within=10.0.0.0/33", "", 400, admin.CodeBadRequest, `within \"10.0.0.0/33\": not a CIDR`},
		{"GET", "/v1/bans?source=robots", "", 400, admin.CodeBadRequest, `source \"robots\"`},
		{"GET", "/v1/bans?namespace=nope:", "", 404, admin.CodeUnknownNamespace, `\"nope:\" (the service has \"protect:\")`},
		{"POST", "/v1/bans", `{"targets": ["198.51.100.0/24"], "for": "2h", "reason": "r", "by": "ops"}`, 201, "", `"seconds_left": 7200`},
		{"POST", "/v1/bans", `{"targets": ["garbage"]}`, 400, admin.CodeBadTarget, `\"garbage\"`},
		{"POST", "/v1/bans", `{"targets": ["0.0.0.0/0"]}`, 400, admin.CodeWideTarget, `0.0.0.0/0`},
		{"POST", "/v1/bans", `{"targets": ["1.2.3.4"], "for": "soon"}`, 400, admin.CodeBadRequest, `for \"soon\"`},
		{"POST", "/v1/bans", `{"target": "1.2.3.4"}`, 400, admin.CodeBadRequest, `unknown field \"target\"`},
		{"POST", "/v1/bans", `{}`, 400, admin.CodeBadRequest, `at least one TARGET`},
		{"DELETE", "/v1/bans", "", 400, admin.CodeNoTarget, `explicitly`},
		{"DELETE", "/v1/bans?all=maybe", "", 400, admin.CodeBadRequest, `all \"maybe\"`},
		{"DELETE", "/v1/bans?target=198.51.100.0/24", "", 200, "", `"key": "198.51.100.0/24"`},
		{"DELETE", "/v1/bans?target=198.51.100.0/24", "", 200, "", `[]`},
		{"GET", "/v1/inspect", "", 400, admin.CodeBadRequest, `exactly one TARGET`},
		{"GET", "/v1/inspect?target=203.0.113.7", "", 200, "", `"reason": "scanner"`},
		{"GET", "/v1/explain?remote=203.0.113.7:1", "", 200, "", `"step": "banned"`},
		{"GET", "/v1/explain?remote=1.2.3.4:1&header=nocolon", "", 400, admin.CodeBadRequest, `header \"nocolon\"`},
		{"GET", "/v1/check?addr=203.0.113.7", "", 200, "", `"refused": true`},
		{"GET", "/v1/check?addr=203.0.113.8", "", 200, "", `"refused": false`},
		{"GET", "/v1/check?addr=203.0.113.0/24", "", 400, admin.CodeBadRequest, `addr \"203.0.113.0/24\": not an IP address`},
		{"GET", "/v1/protectors", "", 200, "", `"ban_namespace": "protect:"`},
		{"PUT", "/v1/bans", "", 405, admin.CodeMethod, `method not allowed`},
		{"GET", "/v1/nothing", "", 404, admin.CodeNotFound, `\"/v1/nothing\"`},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
		w := httptest.NewRecorder()
		admin.Handler(mem.ps...).ServeHTTP(w, req)
		body := w.Body.String()
		ctype := "application/json"
		if tt.code != "" {
			ctype = "application/problem+json"
			var p admin.Problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Code != tt.code || p.Status != tt.status {
				t.Errorf("%s %s = problem %+v (%v), want code %s, status %d", tt.method, tt.path, p, err, tt.code, tt.status)
			}
		}
		if w.Code != tt.status || w.Header().Get("Content-Type") != ctype || !strings.Contains(body, tt.says) {
			t.Errorf("%s %s = %d %s\n%s\nwant %d %s holding %s", tt.method, tt.path, w.Code, w.Header().Get("Content-Type"), body, tt.status, ctype, tt.says)
		}
	}
	// The exact fields of each record: a field renamed or dropped fails.
	fields := func(path string) string {
		w := httptest.NewRecorder()
		admin.Handler(mem.ps...).ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		var v any
		json.Unmarshal(w.Body.Bytes(), &v)
		if a, ok := v.([]any); ok && len(a) > 0 {
			v = a[0]
		}
		m, _ := v.(map[string]any)
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		return fmt.Sprint(sortStrings(keys))
	}
	for path, want := range map[string]string{
		"/v1/bans":                         "[ban_namespace by created expires key malformed offense permanent range reason seconds_left source]",
		"/v1/check?addr=203.0.113.7":       "[addr refused safe safe_networks sources]",
		"/v1/protectors":                   "[ban_namespace dry_run limits name namespace published]",
		"/v1/inspect?target=203.0.113.7":   "[ban ban_limit ban_namespace count count_seconds_left key limit limits limits_published namespace offenses protectors range_bans safe target]",
		"/v1/explain?remote=203.0.113.7:1": "[ban ban_limit ban_namespace client count dry_run key limit limits_published namespace notes peer protectors reason status step]",
	} {
		if got := fields(path); got != want {
			t.Errorf("fields of GET %s = %s, want %s", path, got, want)
		}
	}
}

func sortStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// A store that fails is 503, code store_unavailable, and its text (which
// names the store's address) goes to the service's log, never to the
// client; protectctl -server exits 1 saying the store did not answer.
func TestHandlerStoreFailure(t *testing.T) {
	var logs strings.Builder
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	store := redisstore.New(c, redisstore.Options{RangeRefresh: -1})
	p, err := protect.New(protect.Config{Store: store, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); store.Close(); c.Close() })
	srv := httptest.NewServer(admin.Handler(p))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/v1/bans", "/v1/inspect?target=1.2.3.4", "/v1/check?addr=1.2.3.4", "/v1/protectors", "/v1/explain?remote=1.2.3.4:1"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var p admin.Problem
		if res.StatusCode != 503 || json.Unmarshal(body, &p) != nil || p.Code != admin.CodeStoreUnavailable || strings.Contains(string(body), "127.0.0.1:1") {
			t.Errorf("GET %s on a dead store = %d %s, want 503 store_unavailable without the store's text", path, res.StatusCode, body)
		}
	}
	if !strings.Contains(logs.String(), "127.0.0.1:1") {
		t.Errorf("service log = %s, want the store's error, naming 127.0.0.1:1", logs.String())
	}
	code, out, errs := ctlServer(t, srv.URL, "bans")
	if code != 1 || out != "" || !strings.Contains(errs, "the store did not answer") || strings.Contains(errs, "127.0.0.1:1") {
		t.Fatalf("protectctl -server bans on a dead store = exit %d, stdout %q, stderr %q; want exit 1 saying the store did not answer", code, out, errs)
	}
}

// -server unix:/path reaches a service on a unix socket.
func TestServerUnixSocket(t *testing.T) {
	mem := newMemService(t, time.Now, protect.Config{})
	mem.ps[0].Ban(t.Context(), "203.0.113.7", protect.BanOptions{Reason: "scanner"})
	sock := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: admin.Handler(mem.ps...)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	for _, url := range []string{"unix:" + sock, "unix://" + sock} {
		if code, out, errs := ctlServer(t, url, "bans"); code != 0 || !strings.Contains(out, "203.0.113.7") || !strings.Contains(out, "scanner") {
			t.Errorf("protectctl -server %s bans = exit %d\n%s%s\nwant the ban of 203.0.113.7", url, code, out, errs)
		}
	}
}
