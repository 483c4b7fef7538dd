package protect

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// serveFrom sends one request from addr to path through h and returns the
// recorder.
func serveFrom(t *testing.T, h http.Handler, addr, path string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = addr + ":1234"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestMiddlewareSkip(t *testing.T) {
	for _, countStatus := range []func(int) bool{nil, func(s int) bool { return s == 404 }} {
		p, _ := newTestProtector(t, Config{MaxRequests: 1, BanLimit: -1, CountStatus: countStatus,
			Skip: func(r *http.Request) bool { return r.URL.Path == "/healthz" }})
		var sawDecision []bool
		h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, ok := FromContext(r.Context())
			sawDecision = append(sawDecision, ok)
			if r.URL.Path != "/healthz" {
				w.WriteHeader(404)
			}
		}))
		for range 5 {
			w := serveFrom(t, h, "203.0.113.7", "/healthz")
			if w.Code != 200 || len(w.Header()) != 0 {
				t.Fatalf("GET /healthz, a skipped request = %d %v, want 200 and no header", w.Code, w.Header())
			}
		}
		// Nothing was counted: the first counted request is the first.
		if w := serveFrom(t, h, "203.0.113.7", "/"); w.Code != 404 || w.Header().Get("RateLimit") == "" {
			t.Fatalf("GET /, the first counted request = %d %v, want 404 with a RateLimit header", w.Code, w.Header())
		}
		if w := serveFrom(t, h, "203.0.113.7", "/"); w.Code != 429 {
			t.Fatalf("GET /, the second counted request = %d, want 429", w.Code)
		}
		if want := []bool{false, false, false, false, false, true}; len(sawDecision) != len(want) || !equalBools(sawDecision, want) {
			t.Fatalf("FromContext ok in the handler = %v, want %v", sawDecision, want)
		}
	}
}

func equalBools(a, b []bool) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

func TestMiddlewareOnRefused(t *testing.T) {
	for _, countStatus := range []func(int) bool{nil, func(s int) bool { return true }} {
		var got []Decision
		p, _ := newTestProtector(t, Config{MaxRequests: 1, BanLimit: -1, TTL: 10 * time.Second, CountStatus: countStatus,
			OnRefused: func(w http.ResponseWriter, r *http.Request, d Decision) {
				got = append(got, d)
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(d.StatusCode())
				w.Write([]byte("slow down, " + r.URL.Path + "\n"))
			}})
		h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		serveFrom(t, h, "203.0.113.7", "/a")
		w := serveFrom(t, h, "203.0.113.7", "/a")
		if w.Code != 429 || w.Body.String() != "slow down, /a\n" || w.Header().Get("Content-Type") != "text/plain" ||
			w.Header().Get("Retry-After") != "10" || w.Header().Get("Cache-Control") != "no-store" ||
			w.Header().Get("RateLimit") != `"protect";r=0;t=10` {
			t.Fatalf("GET /a, refused = %d %v %q; want OnRefused's 429 text/plain \"slow down, /a\" with Retry-After 10, no-store, r=0", w.Code, w.Header(), w.Body)
		}
		if len(got) != 1 || got[0].Status != Limited || got[0].Key.String() != "203.0.113.7" {
			t.Fatalf("decisions OnRefused saw = %+v, want one, limited, of 203.0.113.7", got)
		}
	}
}

func TestFromContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("FromContext(context.Background()) ok = true, want false outside Middleware")
	}
	type ctxKey struct{}
	outer, _ := newTestProtector(t, Config{MaxRequests: 10, Namespace: "outer:"})
	inner, _ := newTestProtector(t, Config{MaxRequests: 3, Namespace: "inner:"})
	var seen []Decision
	h := outer.Middleware(inner.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok := FromContext(r.Context())
		if !ok {
			t.Error("FromContext(r.Context()) ok in the handler = false, want true")
		}
		// Values and cancellation of the request's own context still reach
		// through the decision's.
		if r.Context().Value(ctxKey{}) != "v" {
			t.Error("r.Context().Value(ctxKey{}) in the handler != \"v\", want the request's own context value")
		}
		seen = append(seen, d)
	})))
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	defer cancel()
	for range 2 {
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
		r.RemoteAddr = "198.51.100.9:1"
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	want := Decision{Status: Allowed, Addr: netip.MustParseAddr("198.51.100.9"), Count: 2, Limit: 3, Remaining: 1, Window: DefaultTTL}
	if len(seen) != 2 || seen[1].Status != want.Status || seen[1].Addr != want.Addr || seen[1].Count != want.Count ||
		seen[1].Limit != want.Limit || seen[1].Remaining != want.Remaining || seen[1].Key.String() != "198.51.100.9" {
		t.Fatalf("FromContext in the handler = %+v, want the inner protector's %+v", seen, want)
	}

	// A derived context finds the parent's cancellation without a goroutine
	// of its own, and carries the decision on.
	var derived context.Context
	var stop context.CancelFunc
	h = inner.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		derived, stop = context.WithTimeout(r.Context(), time.Hour)
	}))
	defer func() { stop() }()
	ctx2, cancel2 := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx2, http.MethodGet, "/", nil)
	r.RemoteAddr = "198.51.100.10:1"
	h.ServeHTTP(httptest.NewRecorder(), r)
	cancel2()
	select {
	case <-derived.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("derived.Done() still open 5s after the request's context was cancelled, want closed")
	}
	if d, ok := FromContext(derived); !ok || d.Count != 1 {
		t.Fatalf("FromContext(derived) = %+v, %v; want count 1, true", d, ok)
	}
}

func TestFromContextCountStatus(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 5, CountStatus: func(s int) bool { return s == 401 }})
	var counts []int64
	h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok := FromContext(r.Context())
		if !ok || d.Status != Allowed {
			t.Errorf("FromContext(r.Context()) = %+v, %v; want allowed, true", d, ok)
		}
		counts = append(counts, d.Count)
		w.WriteHeader(401)
	}))
	for range 3 {
		serveFrom(t, h, "192.0.2.1", "/login")
	}
	// The check before the handler: failures counted so far.
	if want := []int64{0, 1, 2}; len(counts) != 3 || counts[0] != want[0] || counts[1] != want[1] || counts[2] != want[2] {
		t.Fatalf("FromContext(r.Context()).Count in the handler = %v, want %v", counts, want)
	}
}

// The allowed path costs what FromContext needs, and nothing more: the
// decision's context and the request's copy.
func TestMiddlewareAllocs(t *testing.T) {
	// MaxRequests within the precomputed RateLimit values, as by default.
	p, _ := newTestProtector(t, Config{MaxRequests: 1000, BanLimit: -1})
	h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "203.0.113.7:1"
	w := &nopWriter{h: http.Header{}}
	h.ServeHTTP(w, r)
	if n := testing.AllocsPerRun(500, func() { h.ServeHTTP(w, r) }); n != 2 {
		t.Fatalf("Middleware allocates %v times per allowed request, want 2 (decisionContext, Request.WithContext)", n)
	}
	skip, _ := newTestProtector(t, Config{Skip: func(*http.Request) bool { return true }})
	h = skip.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	if n := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r) }); n != 0 {
		t.Fatalf("Middleware allocates %v times per skipped request, want 0", n)
	}
}

type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

func TestStatusText(t *testing.T) {
	for s := Allowed; s <= Exhausted; s++ {
		b, err := json.Marshal(s)
		if err != nil || string(b) != `"`+s.String()+`"` {
			t.Fatalf("json.Marshal(%v) = %s, %v; want %q", s, b, err, s.String())
		}
		var back Status
		if err := json.Unmarshal(b, &back); err != nil || back != s {
			t.Fatalf("json.Unmarshal(%s) = %v, %v; want %v", b, back, err, s)
		}
	}
	var s Status
	if err := s.UnmarshalText([]byte("LIMITED")); err == nil || !strings.Contains(err.Error(), `"LIMITED"`) {
		t.Fatalf("UnmarshalText(LIMITED) = %v, want an error quoting \"LIMITED\"", err)
	}
}

func TestDecisionLogValue(t *testing.T) {
	exp := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		d    Decision
		want string
	}{
		{"limited", Decision{Status: Limited, Addr: netip.MustParseAddr("203.0.113.7"), Key: Key{Prefix: netip.MustParsePrefix("203.0.113.7/32")},
			Count: 201, Limit: 200, RetryAfter: 10 * time.Second},
			`"d":{"status":"limited","addr":"203.0.113.7","key":"203.0.113.7","count":201,"limit":200,"remaining":0,"retry_after":10000000000}`},
		{"banned, dry run", Decision{Status: Banned, Key: ConsumerKey("cus_alpha"), RetryAfter: time.Hour, BanExpires: exp, DryRun: true},
			`"d":{"status":"banned","key":"cus_alpha","retry_after":3600000000000,"ban_expires":"2026-12-01T00:00:00Z","dry_run":true}`},
		{"plan", Decision{Status: Exhausted, Key: ConsumerKey("acme"), Limit: 100, Count: 0, Remaining: 0, Policy: "monthly"},
			`"d":{"status":"exhausted","key":"acme","count":0,"limit":100,"remaining":0,"policy":"monthly"}`},
		{"unknown", Decision{Status: Unknown, Err: ErrUnknownClient},
			`"d":{"status":"unknown","error":"` + ErrUnknownClient.Error() + `"}`},
		{"safe", Decision{Status: Safe}, `"d":{"status":"safe"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime})).Info("m", "d", tc.d, "s", tc.d.Status)
			want := `{"level":"INFO","msg":"m",` + tc.want + `,"s":"` + tc.d.Status.String() + `"}` + "\n"
			if buf.String() != want {
				t.Fatalf("JSONHandler.Info(%s) logged\n%s\nwant\n%s", tc.name, buf.String(), want)
			}
		})
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime})).Info("m", "d", Decision{Status: Limited, Limit: 2, Count: 3, RetryAfter: time.Second})
	if want := "level=INFO msg=m d.status=limited d.count=3 d.limit=2 d.remaining=0 d.retry_after=1s\n"; buf.String() != want {
		t.Fatalf("TextHandler.Info(Decision) logged %q, want %q", buf.String(), want)
	}
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
