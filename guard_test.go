package protect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpprotect/protect/store"
)

// flakyStore is a store outside the process with none of the optional
// capabilities (remoteStore), whose Take fails while down is set: the
// guard, tested on the kind of store a third party writes.
type flakyStore struct {
	remoteStore
	down *atomic.Bool
	bans *atomic.Int64 // AddBan calls
}

type flakySpace struct {
	store.Space
	s flakyStore
}

func (s flakyStore) Space(sc store.Scope) (store.Space, error) {
	sp, err := s.remoteStore.Space(sc)
	if err != nil {
		return nil, err
	}
	return flakySpace{sp, s}, nil
}

var errDown = errors.New("store down")

func (sp flakySpace) Take(ctx context.Context, k Key, a netip.Addr, n int64) (store.Result, error) {
	if sp.s.down.Load() {
		return store.Result{}, errDown
	}
	return sp.Space.Take(ctx, k, a, n)
}

func (sp flakySpace) AddBan(ctx context.Context, b Ban, length time.Duration) (Ban, error) {
	sp.s.bans.Add(1)
	return sp.Space.AddBan(ctx, b, length)
}

func newFlaky(t *testing.T) (flakyStore, *Protector) {
	t.Helper()
	s := flakyStore{remoteStore{NewMemoryStore(MemoryOptions{})}, new(atomic.Bool), new(atomic.Int64)}
	t.Cleanup(func() { s.Close() })
	p, err := New(Config{Store: s, MaxRequests: 1, BanLimit: 1, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return s, p
}

// A ban the FailLocal store wrote while the store was down is written to
// the store once it answers, for the store's other instances to see; the
// store needs no capability for it.
func TestGuardReplaysLocalBans(t *testing.T) {
	s, p := newFlaky(t)
	s.down.Store(true)
	a := netip.MustParseAddr("192.0.2.9")
	for i := range 2 {
		d, _ := p.VerifyAddr(t.Context(), a)
		if want := []Status{Allowed, Banned}[i]; d.Status != want || !errors.Is(d.Err, errDown) {
			t.Fatalf("VerifyAddr(%v) #%d with the store down = %v, %v; want %v by FailLocal, Err %v", a, i+1, d.Status, d.Err, want, errDown)
		}
	}
	if n := p.Stats().PendingBans; n != 1 {
		t.Fatalf("Stats().PendingBans = %d, want 1", n)
	}
	s.down.Store(false)
	p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.10")) // the store answers: the replay starts
	p.Close()                                                    // and Close waits for it
	if n, got := s.bans.Load(), p.Stats().PendingBans; n != 1 || got != 0 {
		t.Fatalf("after the store came back: AddBan calls = %d, PendingBans = %d; want 1, 0", n, got)
	}
	sp, err := s.MemoryStore.Space(store.Scope{Namespace: DefaultNamespace, Limits: p.lim})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := sp.Inspect(t.Context(), Key{Prefix: netip.PrefixFrom(a, 32)}); err != nil || st.Ban == nil {
		t.Fatalf("store's Inspect(%v).Ban = %v, %v; want the replayed ban", a, st.Ban, err)
	}
}

// Nothing starts in the background once Close has returned: a request
// still in flight does not start a replay on a store its owner is about
// to close.
func TestGuardStartsNothingAfterClose(t *testing.T) {
	s, p := newFlaky(t)
	s.down.Store(true)
	a := netip.MustParseAddr("192.0.2.9")
	for range 2 {
		p.VerifyAddr(t.Context(), a)
	}
	s.down.Store(false)
	p.Close()
	p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.10")) // late: the store answers
	p.guard.bg.Wait()                                            // whatever the late request started
	if n := p.Stats().PendingBans; n != 1 {
		t.Fatalf("Stats().PendingBans after Close and a late request = %d, want 1 (no replay started)", n)
	}
	if n := s.bans.Load(); n != 0 {
		t.Fatalf("AddBan calls after Close = %d, want 0", n)
	}
}

// remoteStore is a store as a third party writes one, which Protector
// tests use to run the path of every store outside the process: the
// memory store behind nothing but the Store and Space interfaces, so that
// the Protector finds none of the optional capabilities and guards it
// (deadline, circuit breaker, failure policy) as it would a database.
type remoteStore struct{ *MemoryStore }

// Space hides what the memory store's space offers beyond Space.
func (s remoteStore) Space(sc store.Scope) (store.Space, error) {
	sp, err := s.MemoryStore.Space(sc)
	if err != nil {
		return nil, err
	}
	return struct{ store.Space }{sp}, nil
}

func is401(s int) bool { return s == http.StatusUnauthorized }
func is404(s int) bool { return s == http.StatusNotFound }

// loginApp answers POST /login: 200 for the right password, else 401.
var loginApp = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.PostFormValue("password") != "hunter2" {
		http.Error(w, "wrong password", http.StatusUnauthorized)
		return
	}
	fmt.Fprint(w, "welcome")
})

// response is what a client saw.
type response struct {
	code                  int
	body                  string
	rateLimit, retryAfter string
	cacheControl          string
}

func (r response) String() string {
	return fmt.Sprintf("%d %q RateLimit %q Retry-After %q Cache-Control %q", r.code, r.body, r.rateLimit, r.retryAfter, r.cacheControl)
}

// serve sends one request from peer through h.
func serve(h http.Handler, method, path, peer string, form url.Values) response {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, path, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	r.RemoteAddr = peer
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return response{
		code: w.Code, body: strings.TrimSpace(w.Body.String()),
		rateLimit: w.Header().Get("RateLimit"), retryAfter: w.Header().Get("Retry-After"),
		cacheControl: w.Header().Get("Cache-Control"),
	}
}

func login(h http.Handler, peer, password string) response {
	return serve(h, "POST", "/login", peer, url.Values{"password": {password}})
}

// inspectCount returns the stream count of the address a.
func inspectCount(t *testing.T, p *Protector, a string) KeyState {
	t.Helper()
	st, err := p.inspect(t.Context(), p.agg.Key(netip.MustParseAddr(a)))
	if err != nil {
		t.Fatalf("Inspect(%s): %v", a, err)
	}
	return st
}

// The login guard: successes never count; MaxRequests failures without a
// pause of TTL, then 429 whatever the password; each refused attempt
// counts on to BanLimit, and the ban escalates.
func TestLoginGuard(t *testing.T) {
	rec := &recorder{}
	p, clk := newTestProtector(t, Config{
		TTL: 15 * time.Minute, MaxRequests: 5, BanLimit: 20, BanDuration: time.Hour,
		CountStatus: is401, Logger: slog.New(rec),
	})
	h := p.Middleware(loginApp)
	const peer = "192.0.2.10:5555"
	for i := 1; i <= 100; i++ {
		if got := login(h, peer, "hunter2"); got.code != 200 || got.body != "welcome" || got.rateLimit != `"protect";r=5;t=900` {
			t.Fatalf("login(%s, right password) %d = %v, want 200 with r=5", peer, i, got)
		}
	}
	if st := inspectCount(t, p, "192.0.2.10"); st.Count != 0 || st.CountTTL != 0 {
		t.Fatalf("Inspect(192.0.2.10) after 100 successes = %+v, want no counter", st)
	}
	// Five failures are answered by the handler, each counted before its
	// header went out: r is what is left after it.
	for i := 1; i <= 5; i++ {
		want := response{code: 401, body: "wrong password", rateLimit: fmt.Sprintf(`"protect";r=%d;t=900`, 5-i)}
		if got := login(h, peer, "wrong"); got != want {
			t.Fatalf("login(%s, wrong) %d = %v, want %v", peer, i, got, want)
		}
	}
	// No failure left: the right password is refused too, and every
	// refused attempt counts.
	for i := 6; i <= 20; i++ {
		got := login(h, peer, "hunter2")
		if got.code != 429 || !strings.Contains(got.body, `"code":"rate_limited"`) || got.retryAfter != "900" || got.rateLimit != `"protect";r=0;t=900` || got.cacheControl != "no-store" {
			t.Fatalf("login(%s, right password) attempt %d = %v, want 429 rate_limited, Retry-After 900", peer, i, got)
		}
	}
	if st := inspectCount(t, p, "192.0.2.10"); st.Count != 20 {
		t.Fatalf("Inspect(192.0.2.10).Count after 20 attempts = %d, want 20", st.Count)
	}
	got := login(h, peer, "hunter2")
	if got.code != 403 || !strings.Contains(got.body, `"code":"banned"`) || got.retryAfter != "3600" {
		t.Fatalf("login(%s) attempt 21 = %v, want 403 banned for 3600s", peer, got)
	}
	clk.Advance(15 * time.Minute) // a pause resets a stream, not a ban
	if got := login(h, peer, "hunter2"); got.code != 403 || got.retryAfter != "2700" {
		t.Fatalf("login(%s) 15 minutes into the ban = %v, want 403, Retry-After 2700", peer, got)
	}
	bans, err := p.bans(t.Context(), BanFilter{})
	if err != nil || len(bans) != 1 || bans[0].Key.String() != "192.0.2.10" || bans[0].Reason != "failures passed the ban limit of 20" ||
		bans[0].Source != SourceAuto || bans[0].Offense != 1 {
		t.Fatalf("Bans() = %+v, %v; want one automatic ban of 192.0.2.10, offense 1", bans, err)
	}
	clk.Advance(45 * time.Minute)
	if got := login(h, peer, "hunter2"); got.code != 200 || got.rateLimit != `"protect";r=5;t=900` {
		t.Fatalf("login(%s) after the ban = %v, want 200 from a fresh count (r=5)", peer, got)
	}
	// The second ban, within the offense window, is twice as long.
	for range 21 {
		login(h, peer, "wrong")
	}
	if got := login(h, peer, "hunter2"); got.code != 403 || got.retryAfter != "7200" {
		t.Fatalf("login(%s) in the second ban = %v, want 403 for 7200s", peer, got)
	}
	var added []map[string]string
	for _, r := range rec.Records() {
		if r["msg"] == "protect: ban added" {
			added = append(added, r)
		}
	}
	if len(added) != 2 || added[0]["reason"] != "failures passed the ban limit of 20" || added[0]["length"] != "1h0m0s" ||
		added[1]["length"] != "2h0m0s" || added[1]["offense"] != "2" || added[1]["key"] != "192.0.2.10" {
		t.Fatalf("logged \"ban added\" records = %v, want two of 192.0.2.10: 1h, then 2h at offense 2", added)
	}
	// Another client of the same login is untouched.
	if got := login(h, "192.0.2.11:1", "hunter2"); got.code != 200 {
		t.Fatalf("login(192.0.2.11, right password) = %v, want 200: another client is untouched", got)
	}
}

// A pause of TTL forgives the failures; MaxRequests failures leave the
// next attempt refused until then.
func TestLoginPause(t *testing.T) {
	tests := []struct {
		failures int
		pause    time.Duration
		want     int
	}{
		{failures: 4, pause: 0, want: 200},
		{failures: 5, pause: 0, want: 429},
		{failures: 5, pause: 15*time.Minute - time.Second, want: 429},
		{failures: 5, pause: 15 * time.Minute, want: 200},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("failures=%d,pause=%v", tt.failures, tt.pause), func(t *testing.T) {
			p, clk := newTestProtector(t, Config{TTL: 15 * time.Minute, MaxRequests: 5, BanLimit: 20, CountStatus: is401})
			h := p.Middleware(loginApp)
			for range tt.failures {
				if got := login(h, "192.0.2.20:1", "wrong"); got.code != 401 {
					t.Fatalf("login(192.0.2.20, wrong) = %v, want 401", got)
				}
			}
			clk.Advance(tt.pause)
			if got := login(h, "192.0.2.20:1", "hunter2"); got.code != tt.want {
				t.Fatalf("login(192.0.2.20, right password) after %v = %v, want %d", tt.pause, got, tt.want)
			}
		})
	}
}

// The scanner trap: 404s on unmatched paths count, real pages never do.
// With BanLimit 5 the sixth probe bans, and the ban holds on every path.
func TestScannerTrap(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "home") })
	mux.HandleFunc("GET /things", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "things") })
	probes := []string{"/.env", "/wp-login.php", "/.git/config", "/phpmyadmin/", "/admin.php", "/server-status"}
	tests := []struct {
		probes   int
		wantNext int // the next request, to a real page
	}{
		{probes: 0, wantNext: 200},
		{probes: 5, wantNext: 200},
		{probes: 6, wantNext: 403},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("probes=%d", tt.probes), func(t *testing.T) {
			p, _ := newTestProtector(t, Config{BanLimit: 5, CountStatus: is404})
			h := p.Middleware(mux)
			// A client of real pages is never counted.
			for i := range 300 {
				path := []string{"/", "/things"}[i%2]
				if got := serve(h, "GET", path, "192.0.2.1:1", nil); got.code != 200 {
					t.Fatalf("GET %s from 192.0.2.1 (request %d) = %v, want 200", path, i, got)
				}
			}
			if st := inspectCount(t, p, "192.0.2.1"); st.Count != 0 {
				t.Fatalf("Inspect(192.0.2.1) after real pages only = %+v, want count 0", st)
			}
			const scanner = "198.51.100.66:40000"
			for i, path := range probes[:tt.probes] {
				got := serve(h, "GET", path, scanner, nil)
				if got.code != 404 {
					t.Fatalf("GET %s from the scanner (probe %d) = %v, want 404", path, i+1, got)
				}
				// The probe that bans still gets the handler's 404, with
				// the ban's fields.
				if i == 5 && (got.retryAfter != "3600" || got.rateLimit != `"protect";r=0;t=3600`) {
					t.Fatalf("GET %s, the banning probe = %v, want 404 with Retry-After 3600 and r=0;t=3600", path, got)
				}
			}
			if got := serve(h, "GET", "/", scanner, nil); got.code != tt.wantNext {
				t.Fatalf("GET / after %d probes = %v, want %d", tt.probes, got, tt.wantNext)
			}
			if tt.wantNext == 403 { // banned on every path
				for _, path := range []string{"/things", "/.env", "/nothing-here"} {
					if got := serve(h, "GET", path, scanner, nil); got.code != 403 || got.retryAfter != "3600" {
						t.Fatalf("GET %s after %d probes = %v, want 403, Retry-After 3600", path, tt.probes, got)
					}
				}
			}
			bans, err := p.bans(t.Context(), BanFilter{})
			if wantBans := tt.probes / 6; err != nil || len(bans) != wantBans {
				t.Fatalf("Bans() = %+v, %v; want %d bans", bans, err, wantBans)
			}
			if st := inspectCount(t, p, "198.51.100.66"); tt.probes < 6 && st.Count != int64(tt.probes) {
				t.Fatalf("Inspect(198.51.100.66).Count = %d, want %d", st.Count, tt.probes)
			}
		})
	}
}

// What the middleware answers before the handler, and when it counts.
func TestFailureMiddlewareCases(t *testing.T) {
	type step struct {
		peer, status string // status: what the handler answers
		xff          string
		want         int
		ran          bool // the handler ran
	}
	tests := []struct {
		name      string
		cfg       Config
		steps     []step
		wantCount map[string]int64
	}{{
		name: "unknown client refused, handler never runs",
		cfg:  Config{TrustedProxies: []string{"10.0.0.0/8"}},
		steps: []step{
			{peer: "10.0.0.1:1", xff: "garbage", status: "401", want: 429},
			{peer: "10.0.0.1:1", xff: "6.6.6.6, ", status: "401", want: 429}, // an empty entry
		},
	}, {
		name: "safe network served and never counted",
		cfg:  Config{MaxRequests: 1, BanLimit: 2, SafeNetworks: []string{"192.0.2.0/24"}},
		steps: []step{
			{peer: "192.0.2.5:1", status: "401", want: 401, ran: true},
			{peer: "192.0.2.5:1", status: "401", want: 401, ran: true},
			{peer: "192.0.2.5:1", status: "401", want: 401, ran: true},
			{peer: "192.0.2.5:1", status: "200", want: 200, ran: true},
		},
		wantCount: map[string]int64{"192.0.2.5": 0},
	}, {
		name: "only the statuses CountStatus names count",
		cfg:  Config{MaxRequests: 2, CountStatus: func(s int) bool { return s == 401 || s == 403 }},
		steps: []step{
			{peer: "198.51.100.1:1", status: "200", want: 200, ran: true},
			{peer: "198.51.100.1:1", status: "404", want: 404, ran: true},
			{peer: "198.51.100.1:1", status: "500", want: 500, ran: true},
			{peer: "198.51.100.1:1", status: "403", want: 403, ran: true},
			{peer: "198.51.100.1:1", status: "none", want: 200, ran: true},
			{peer: "198.51.100.1:1", status: "401", want: 401, ran: true},
			{peer: "198.51.100.1:1", status: "200", want: 429},
		},
		wantCount: map[string]int64{"198.51.100.1": 3},
	}, {
		name: "dry run never refuses and counts as a live protector would",
		cfg:  Config{MaxRequests: 1, BanLimit: 3, DryRun: true},
		steps: []step{
			{peer: "198.51.100.2:1", status: "401", want: 401, ran: true}, // count 1
			{peer: "198.51.100.2:1", status: "401", want: 401, ran: true}, // would be refused: count 2
			{peer: "198.51.100.2:1", status: "200", want: 200, ran: true}, // count 3
			{peer: "198.51.100.2:1", status: "200", want: 200, ran: true}, // would be banned
			{peer: "198.51.100.2:1", status: "401", want: 401, ran: true}, // banned: nothing counted
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg.CountStatus == nil {
				cfg.CountStatus = is401
			}
			p, _ := newTestProtector(t, cfg)
			ran := false
			h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ran = true
				switch s := r.Header.Get("X-Status"); s {
				case "none":
				default:
					var code int
					fmt.Sscan(s, &code)
					w.WriteHeader(code)
				}
			}))
			for i, s := range tt.steps {
				ran = false
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = s.peer
				if s.xff != "" {
					r.Header.Set("X-Forwarded-For", s.xff)
				}
				r.Header.Set("X-Status", s.status)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != s.want || ran != s.ran {
					t.Fatalf("step %d (%+v): ServeHTTP = %d, handler ran %v; want %d, %v", i+1, s, w.Code, ran, s.want, s.ran)
				}
			}
			for a, want := range tt.wantCount {
				if st := inspectCount(t, p, a); st.Count != want {
					t.Fatalf("Inspect(%s).Count = %d, want %d", a, st.Count, want)
				}
			}
		})
	}
}

// In a dry run the counters are written as they would be, nothing is
// refused, and no ban is written: a live protector on the same ban list
// would enforce it.
func TestFailureMiddlewareDryRunWrites(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 1, BanLimit: 3, DryRun: true, CountStatus: is401})
	h := p.Middleware(loginApp)
	var codes []int
	for range 5 {
		codes = append(codes, login(h, "198.51.100.3:1", "wrong").code)
	}
	if fmt.Sprint(codes) != "[401 401 401 401 401]" {
		t.Fatalf("login(198.51.100.3, wrong) × 5 = %v, want [401 401 401 401 401]: a dry run refuses nothing", codes)
	}
	// Counts 1; would be 429, counts 2; would be 429, counts 3; would be
	// banned, counts 4 (would ban); would be banned, counts nothing.
	bans, err := p.bans(t.Context(), BanFilter{})
	if err != nil || len(bans) != 0 {
		t.Fatalf("Bans() = %+v, %v; want none", bans, err)
	}
	if st := inspectCount(t, p, "198.51.100.3"); st.Count != 4 {
		t.Fatalf("Inspect(198.51.100.3).Count = %d, want 4", st.Count)
	}
}

// Over a real connection: a streaming handler keeps Flush, a hijacking
// one keeps Hijack and is never counted, and a sendfile-style handler
// keeps ReadFrom; the failure is counted before the header leaves, so
// the response carries the fields after the count.
func TestFailureMiddlewareOverHTTP(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 3, BanLimit: 100, CountStatus: func(s int) bool { return s >= 400 }})
	mux := http.NewServeMux()
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, "part one;")
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "part two")
	})
	mux.HandleFunc("/hijack", func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("Hijack() = %v, want nil", err)
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 400 Bad Request\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbye")
		buf.Flush()
	})
	mux.HandleFunc("/file", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(io.ReaderFrom); !ok {
			t.Error("w.(io.ReaderFrom) = false, want true: the writer keeps io.ReaderFrom")
		}
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("ResponseController.SetWriteDeadline() = %v, want nil", err)
		}
		// io.Copy prefers the source's WriterTo: hide it, so that the
		// writer's ReadFrom does the copy.
		io.Copy(w, struct{ io.Reader }{strings.NewReader("file contents")})
	})
	srv := httptest.NewServer(p.Middleware(mux))
	t.Cleanup(srv.Close)
	get := func(path string) (int, string, http.Header) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	for range 3 {
		if code, body, _ := get("/hijack"); code != 400 || body != "bye" {
			t.Fatalf("GET /hijack = %d %q, want 400 \"bye\"", code, body)
		}
	}
	if st := inspectCount(t, p, "127.0.0.1"); st.Count != 0 {
		t.Fatalf("Inspect(127.0.0.1).Count after hijacked connections = %d, want 0", st.Count)
	}
	if code, body, h := get("/file"); code != 200 || body != "file contents" || h.Get("RateLimit") != `"protect";r=3;t=10` {
		t.Fatalf("GET /file = %d %q %v, want 200 \"file contents\", r=3", code, body, h)
	}
	if code, body, h := get("/stream"); code != 403 || body != "part one;part two" || h.Get("RateLimit") != `"protect";r=2;t=10` {
		t.Fatalf("GET /stream = %d %q %v, want 403 \"part one;part two\", r=2", code, body, h)
	}
	if st := inspectCount(t, p, "127.0.0.1"); st.Count != 1 {
		t.Fatalf("Inspect(127.0.0.1).Count = %d, want 1", st.Count)
	}
}

// Penalize counts n at a time, limits past MaxRequests, bans past
// BanLimit with the protector's ordinary reason (it has no CountStatus),
// and counts nothing on a banned client.
func TestPenalizeCountsN(t *testing.T) {
	rec := &recorder{}
	p, _ := newTestProtector(t, Config{MaxRequests: 10, BanLimit: 12, Logger: slog.New(rec)})
	r := request("203.0.113.9:1")
	ctx := t.Context()
	for i, n := range []int64{1, 3, 6} {
		d, err := p.Penalize(ctx, r, n)
		want := []int64{1, 4, 10}[i]
		if err != nil || d.Err != nil || d.Status != Allowed || d.Count != want || d.Remaining != 10-want || d.Key.String() != "203.0.113.9" {
			t.Fatalf("Penalize(%d) = %v count %d remaining %d key %s, %v %v; want allowed with count %d", n, d.Status, d.Count, d.Remaining, d.Key, err, d.Err, want)
		}
	}
	if d, _ := p.Penalize(ctx, r, 2); d.Status != Limited || d.Count != 12 || d.RetryAfter != DefaultTTL {
		t.Fatalf("Penalize(2) past MaxRequests = %v count %d retry after %v, want limited, count 12, %v", d.Status, d.Count, d.RetryAfter, DefaultTTL)
	}
	d, _ := p.Penalize(ctx, r, 1)
	if d.Status != Banned || d.Ban == nil || d.Ban.Reason != "stream passed the ban limit of 12 requests" || d.RetryAfter != time.Hour {
		t.Fatalf("Penalize(1) past BanLimit = %v %+v, retry after %v; want banned for 1h by the stream", d.Status, d.Ban, d.RetryAfter)
	}
	// A banned client is not counted further; a Check sees the same ban.
	if d, _ := p.Penalize(ctx, r, 5); d.Status != Banned || d.Count != 0 {
		t.Fatalf("Penalize(5) of a banned client = %v count %d, want banned, count 0", d.Status, d.Count)
	}
	if d, _ := p.Check(ctx, r); d.Status != Banned {
		t.Fatalf("Check() after the ban = %v, want banned", d.Status)
	}
	if n := len(rec.Records()); n != 1 || rec.Records()[0]["msg"] != "protect: ban added" || rec.Records()[0]["key"] != "203.0.113.9" {
		t.Fatalf("logged records = %v, want one \"protect: ban added\" of 203.0.113.9", rec.Records())
	}
}

// n must be positive: nothing is counted otherwise.
func TestPenalizeBadN(t *testing.T) {
	p, _ := newTestProtector(t, Config{})
	r := request("203.0.113.9:1")
	for _, n := range []int64{0, -1, -1 << 63} {
		d, err := p.Penalize(t.Context(), r, n)
		if !errors.Is(err, ErrBadPenalty) || !strings.Contains(err.Error(), fmt.Sprint(n)) || d != (Decision{}) {
			t.Fatalf("Penalize(%d) = %+v, %v; want the zero Decision and ErrBadPenalty", n, d, err)
		}
	}
	if st := inspectCount(t, p, "203.0.113.9"); st.Count != 0 {
		t.Fatalf("Inspect(203.0.113.9).Count after bad penalties = %d, want 0", st.Count)
	}
}

// Penalize resolves the client as Verify does: unknown and safe clients
// are never counted, and KeyFunc's consumer is counted in place of the
// address.
func TestPenalizeResolvesAsVerify(t *testing.T) {
	p, _ := newTestProtector(t, Config{
		TrustedProxies: []string{"10.0.0.0/8"}, SafeNetworks: []string{"192.0.2.0/24"},
		KeyFunc: func(r *http.Request) (string, bool) { return r.Header.Get("X-Consumer"), true },
	})
	tests := []struct {
		name       string
		peer, xff  string
		consumer   string
		wantStatus Status
		wantKey    string
	}{
		{name: "direct", peer: "198.51.100.7:1", wantStatus: Allowed, wantKey: "198.51.100.7"},
		{name: "behind the proxy", peer: "10.0.0.1:1", xff: "198.51.100.8", wantStatus: Allowed, wantKey: "198.51.100.8"},
		{name: "garbage behind the proxy", peer: "10.0.0.1:1", xff: "198.51.100.8, nonsense", wantStatus: Unknown},
		{name: "safe", peer: "192.0.2.5:1", wantStatus: Safe},
		{name: "safe behind the proxy", peer: "10.0.0.1:1", xff: "192.0.2.6", wantStatus: Safe},
		{name: "consumer", peer: "198.51.100.9:1", consumer: "cus_alpha", wantStatus: Allowed, wantKey: "cus_alpha"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request(tt.peer)
			if tt.xff != "" {
				r.Header.Set("X-Forwarded-For", tt.xff)
			}
			if tt.consumer != "" {
				r.Header.Set("X-Consumer", tt.consumer)
			}
			d, err := p.Penalize(t.Context(), r, 7)
			if err != nil || d.Status != tt.wantStatus || d.Key.String() != tt.wantKey {
				t.Fatalf("Penalize(7) = %v key %q, %v; want %v key %q", d.Status, d.Key, err, tt.wantStatus, tt.wantKey)
			}
			if tt.wantKey != "" && d.Count != 7 {
				t.Fatalf("Penalize(7).Count = %d, want 7", d.Count)
			}
			if tt.wantKey == "" && (d.Count != 0 || d.Key != (Key{})) {
				t.Fatalf("Penalize(7) of a %v client = count %d under %q, want 0 under no key", d.Status, d.Count, d.Key)
			}
		})
	}
}

// A forged X-Forwarded-For penalizes the forger, never the address it
// names: from outside the trusted proxies, and through them.
func TestPenalizeForgedHeader(t *testing.T) {
	const victim, forger = "203.0.113.7", "198.51.100.66"
	tests := []struct {
		name string
		peer string
		xff  []string
	}{
		{name: "direct, naming the victim", peer: forger + ":4000", xff: []string{victim}},
		{name: "direct, naming the victim behind a proxy", peer: forger + ":4000", xff: []string{victim + ", 10.0.0.2"}},
		{name: "through the proxy", peer: "10.0.0.1:5555", xff: []string{victim + ", " + forger}},
		{name: "through the proxy, two lines", peer: "10.0.0.1:5555", xff: []string{victim, forger}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newTestProtector(t, Config{TrustedProxies: []string{"10.0.0.0/8"}, MaxRequests: 5, BanLimit: 10, CountStatus: is401})
			for i := 1; i <= 11; i++ {
				d, err := p.Penalize(t.Context(), request(tt.peer, tt.xff...), 1)
				if err != nil || d.Addr.String() != forger || d.Key.String() != forger {
					t.Fatalf("Penalize(1) %d = %v addr %v key %s, %v; want the forger %s", i, d.Status, d.Addr, d.Key, err, forger)
				}
				if (d.Status == Banned) != (i == 11) {
					t.Fatalf("Penalize(1) %d = %v, want banned at the 11th alone", i, d.Status)
				}
			}
			if st := inspectCount(t, p, victim); st.Count != 0 || st.Ban != nil || st.Offenses != 0 {
				t.Fatalf("Inspect(%s) = %+v, want the victim untouched", victim, st)
			}
			if d := verify(t, p, request(victim+":1")); d.Status != Allowed || d.Count != 1 {
				t.Fatalf("Verify(%s) afterwards = %v count %d, want allowed, count 1", victim, d.Status, d.Count)
			}
			bans, _ := p.bans(t.Context(), BanFilter{})
			if len(bans) != 1 || bans[0].Key.String() != forger {
				t.Fatalf("Bans() = %+v, want the forger %s alone", bans, forger)
			}
		})
	}
}

// The gap between check and count: requests already in flight pass, and
// every failure among them is counted, up to the ban.
func TestInFlightGap(t *testing.T) {
	p, _ := newTestProtector(t, Config{TTL: 15 * time.Minute, MaxRequests: 5, BanLimit: 20, CountStatus: is401})
	const n = 50
	var arrived sync.WaitGroup
	arrived.Add(n)
	h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		arrived.Wait() // every guess has been checked before any fails
		loginApp(w, r)
	}))
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { codes <- login(h, "198.51.100.50:1", "wrong").code })
	}
	wg.Wait()
	close(codes)
	got := map[int]int{}
	for c := range codes {
		got[c]++
	}
	if got[401] != n || len(got) != 1 {
		t.Fatalf("codes of %d guesses in flight = %v, want %d × 401", n, got, n)
	}
	st := inspectCount(t, p, "198.51.100.50")
	if st.Ban == nil || st.Offenses != 1 || st.Count != 0 {
		t.Fatalf("Inspect(198.51.100.50) after the burst = %+v, want one ban, count 0", st)
	}
	if got := login(h, "198.51.100.50:1", "hunter2"); got.code != 403 {
		t.Fatalf("login(198.51.100.50, right password) after the burst = %v, want 403", got)
	}
}

// Under Config.Plan the failures are held to the plan ("3 failures a
// minute, refilled one every 20s"), and the stream beside it still bans
// a client that keeps trying.
func TestFailuresUnderAPlan(t *testing.T) {
	plan, err := NewPlan("login", Rate{Name: "failures", Limit: 3, Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	p, clk := newTestProtector(t, Config{Plan: plan, BanLimit: 10, TTL: time.Hour, CountStatus: is401})
	h := p.Middleware(loginApp)
	const peer = "192.0.2.60:1"
	send := func(password string, n int) string {
		var codes []string
		for range n {
			codes = append(codes, fmt.Sprint(login(h, peer, password).code))
		}
		return strings.Join(codes, " ")
	}
	if got := send("hunter2", 20); got != strings.TrimSpace(strings.Repeat("200 ", 20)) {
		t.Fatalf("send(right password, 20) = %s, want 20 × 200", got)
	}
	if got := send("wrong", 4); got != "401 401 401 429" {
		t.Fatalf("send(wrong, 4) = %s, want 401 401 401 429", got)
	}
	clk.Advance(20 * time.Second) // one failure refilled
	if got := send("wrong", 2); got != "401 429" {
		t.Fatalf("send(wrong, 2) after 20s = %s, want 401 429", got)
	}
	// Stream: 4 failures and 2 refused attempts so far; past 10 bans.
	if got := send("hunter2", 5); got != "429 429 429 429 403" {
		t.Fatalf("send(right password, 5), attempts 7-11 = %s, want 429 429 429 429 403", got)
	}
	bans, err := p.bans(t.Context(), BanFilter{})
	if err != nil || len(bans) != 1 || bans[0].Reason != "failures passed the ban limit of 10" {
		t.Fatalf("Bans() = %+v, %v; want one, its reason \"failures passed the ban limit of 10\"", bans, err)
	}
}

// A consumer's failures are held to its plan, through ConsumerFunc, and
// never ban it: consumers are limited, not banned.
func TestFailuresOfAConsumer(t *testing.T) {
	plan, err := NewPlan("webhooks", Rate{Name: "bad-signatures", Limit: 2, Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := newTestProtector(t, Config{BanLimit: 3, CountStatus: is401,
		ConsumerFunc: func(r *http.Request) (string, *Plan, bool) { return r.Header.Get("X-Consumer"), plan, true }})
	h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Signature") != "good" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	send := func(consumer, sig string, n int) string {
		var codes []string
		for range n {
			r := request("192.0.2.70:1")
			r.Header.Set("X-Consumer", consumer)
			r.Header.Set("X-Signature", sig)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			codes = append(codes, fmt.Sprint(w.Code))
		}
		return strings.Join(codes, " ")
	}
	if got := send("acme", "good", 10) + " " + send("acme", "bad", 2) + " " + send("acme", "good", 10); got != strings.TrimSpace(strings.Repeat("200 ", 10)+"401 401 "+strings.Repeat("429 ", 10)) {
		t.Fatalf("send(acme: 10 good, 2 bad, 10 good) = %s, want 10 × 200, 401 401, 10 × 429", got)
	}
	if got := send("globex", "good", 2); got != "200 200" {
		t.Fatalf("send(globex, good, 2), another consumer behind the same address = %s, want 200 200", got)
	}
	if bans, err := p.bans(t.Context(), BanFilter{}); err != nil || len(bans) != 0 {
		t.Fatalf("Bans() = %+v, %v; want none: consumers are never banned automatically", bans, err)
	}
}

// A failure that bans the client while the handler writes its status
// leaves no RateLimit field from the check before it: the client has
// nothing left, not what the check saw.
func TestFailureThatBansDropsTheCheckFields(t *testing.T) {
	plan, err := NewPlan("login", Rate{Name: "failures", Limit: 3, Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	p, clk := newTestProtector(t, Config{Plan: plan, BanLimit: 4, TTL: time.Hour, CountStatus: is401})
	h := p.Middleware(loginApp)
	const peer = "192.0.2.61:1"
	for range 4 { // three 401s, then one 429: the stream counts 4
		login(h, peer, "wrong")
	}
	clk.Advance(20 * time.Second) // one failure fits again
	got := login(h, peer, "wrong")
	bans, _ := p.bans(t.Context(), BanFilter{})
	if len(bans) != 1 || got.code != http.StatusUnauthorized || got.rateLimit != "" || got.retryAfter != "3600" {
		t.Fatalf("login(%s, wrong), the failure that crosses BanLimit = %v with %d bans; want 401, no RateLimit, Retry-After 3600, one ban", peer, got, len(bans))
	}
}

// A handler that panics is counted as the 500 net/http answers with: a
// probe that crashes a handler does not escape the trap.
func TestFailureOfAPanickingHandler(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 3, CountStatus: func(s int) bool { return s >= 500 }})
	var ran atomic.Int32
	srv := httptest.NewUnstartedServer(p.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		ran.Add(1)
		panic("boom")
	})))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	for range 5 {
		if resp, err := http.Get(srv.URL); err == nil {
			resp.Body.Close()
		}
	}
	// Three panics counted; the 4th and 5th attempts are refused before
	// the handler, and counted.
	if st := inspectCount(t, p, "127.0.0.1"); st.Count != 5 || ran.Load() != 3 {
		t.Fatalf("Inspect(127.0.0.1).Count after 5 requests to a panicking handler = %d, handler ran %d times; want 5 and 3", st.Count, ran.Load())
	}
}

// A ban on an address holds for every request from it, whatever is
// counted: a banned scanner that sends an API key is still banned, and so
// is an address an operator banned.
func TestAddressBanHoldsForConsumers(t *testing.T) {
	plan, err := NewPlan("trial", Rate{Limit: 100, Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	byHeader := func(r *http.Request) (string, bool) {
		return r.Header.Get("X-Api-Key"), r.Header.Get("X-Api-Key") != ""
	}
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"ConsumerFunc", Config{ConsumerFunc: func(r *http.Request) (string, *Plan, bool) {
			id, ok := byHeader(r)
			return id, plan, ok
		}}},
		{"KeyFunc", Config{KeyFunc: byHeader}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.MaxRequests, cfg.BanLimit, cfg.CountStatus = 3, 5, is404
			p, _ := newTestProtector(t, cfg)
			h := p.Middleware(http.NotFoundHandler())
			for range 9 { // anonymous probes, until banned
				h.ServeHTTP(httptest.NewRecorder(), request("192.0.2.5:1"))
			}
			r := request("192.0.2.5:1")
			r.Header.Set("X-Api-Key", "free-trial-123")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusForbidden {
				t.Fatalf("ServeHTTP(192.0.2.5, banned scanner with an API key) = %d, want 403", w.Code)
			}
			if _, err := p.Ban(t.Context(), "192.0.2.6", BanOptions{}); err != nil {
				t.Fatal(err)
			}
			r = request("192.0.2.6:1")
			r.Header.Set("X-Api-Key", "free-trial-123")
			if d, _ := p.Verify(t.Context(), r); d.Status != Banned || d.Key.String() != "192.0.2.6" {
				t.Fatalf("Verify(192.0.2.6, operator-banned, with an API key) = %v %s, want banned on 192.0.2.6", d.Status, d.Key)
			}
			r = request("192.0.2.7:1")
			r.Header.Set("X-Api-Key", "free-trial-123")
			if d, _ := p.Verify(t.Context(), r); d.Status != Allowed || d.Key.String() != "free-trial-123" {
				t.Fatalf("Verify(192.0.2.7, with the same key) = %v %s, want allowed, counted as the consumer", d.Status, d.Key)
			}
		})
	}
}
