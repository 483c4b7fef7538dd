package redisstore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/logtest"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/internal/testclock"
	"github.com/redis/go-redis/v9"
)

// The circuit breaker's numbers, as store/circuit.go has them: this
// many failures in a row open it, for this long.
const (
	breakerThreshold = 3
	breakerCooldown  = time.Second
)

var (
	redisTargets  = redistest.Targets
	dial          = redistest.Dial
	realRedisAddr = redistest.RealAddr
	clusterAddrs  = redistest.ClusterAddrs
	allKeys       = redistest.AllKeys
	testNamespace = redistest.NamespaceAt
	newFakeClock  = testclock.New
)

type (
	recorder     = logtest.Recorder
	redisTarget  = redistest.Target
	countingHook = redistest.CountingHook
	fakeClock    = testclock.Clock
)

func uniqueNamespace(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	return redistest.Namespace(t, c)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// instance is one service instance: its own client, store and protector.
type instance struct {
	p     *protect.Protector
	store *Store
	hook  *countingHook
	clock *fakeClock
}

// newInstance starts one instance on the Redis at addr. Its limits are
// published before it returns, so that tests that count round trips see
// only their own.
func newInstance(t *testing.T, addr, ns string, cfg protect.Config, opt Options) *instance {
	t.Helper()
	return startInstance(t, addr, ns, cfg, opt, true)
}

// startInstance is newInstance, publishing the limits first or not.
func startInstance(t *testing.T, addr, ns string, cfg protect.Config, opt Options, publish bool) *instance {
	t.Helper()
	c := dial(addr)
	hook := &countingHook{}
	c.AddHook(hook)
	clk := newFakeClock()
	if opt.Clock == nil {
		opt.Clock = clk.Now
	}
	if opt.Logger == nil {
		opt.Logger = discardLogger()
	}
	s := New(c, opt)
	cfg.Store, cfg.Namespace = s, ns
	if cfg.BanNamespace == "" {
		cfg.BanNamespace = ns // the test's own ban list, apart from every other test's
	}
	if cfg.Clock == nil {
		cfg.Clock = clk.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = discardLogger()
	}
	p, err := protect.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if publish && !cfg.DryRun {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		p.Publish(ctx) // a test of a dead store gets its error in the log
		cancel()
	}
	hook.Take()
	t.Cleanup(func() { p.Close(); s.Close(); c.Close() })
	return &instance{p: p, store: s, hook: hook, clock: clk}
}

type tally map[protect.Status]int

func (tl tally) String() string {
	return fmt.Sprintf("allowed %d, limited %d, banned %d, other %d",
		tl[protect.Allowed], tl[protect.Limited], tl[protect.Banned], tl[protect.Safe]+tl[protect.Unknown]+tl[protect.Unavailable])
}

// sendAll makes n verifications through verify, one by one or all at once,
// and counts the outcomes. Any error, returned or absorbed, fails the test.
func sendAll(t *testing.T, n int, concurrent bool, verify func(i int) (protect.Decision, error)) tally {
	t.Helper()
	got := tally{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		one := func() {
			d, err := verify(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || d.Err != nil {
				t.Errorf("request %d: %v %v", i, err, d.Err)
			}
			got[d.Status]++
		}
		if concurrent {
			wg.Go(one)
		} else {
			one()
		}
	}
	wg.Wait()
	return got
}

func request(peer string, xff ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = peer
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	return r
}

func verify(t *testing.T, p *protect.Protector, r *http.Request) protect.Decision {
	t.Helper()
	d, err := p.Verify(t.Context(), r)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return d
}

func mustPlan(t testing.TB, name string, limits ...protect.PlanLimit) *protect.Plan {
	t.Helper()
	p, err := protect.NewPlan(name, limits...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func headers(d protect.Decision) http.Header {
	h := http.Header{}
	d.WriteHeaders(h)
	return h
}

// newTestProtector returns a protector on a memory store with a fake clock.
func newTestProtector(t *testing.T, cfg protect.Config) (*protect.Protector, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	if cfg.Clock == nil {
		cfg.Clock = clk.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = discardLogger()
	}
	p, err := protect.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, clk
}

// bannedKeys lists the keys p's ban list holds, sorted.
func bannedKeys(t *testing.T, p *protect.Protector) []string {
	t.Helper()
	bans, err := admin.New(p).Bans(t.Context(), admin.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range bans {
		out = append(out, b.Key.String())
	}
	slices.Sort(out)
	return out
}

func is401(s int) bool { return s == http.StatusUnauthorized }

// cancelKey carries a request's cancel function to its handler.
type cancelKey struct{}

// inspectCount returns the state of a's counting key in p.
func inspectCount(t *testing.T, p *protect.Protector, a string) protect.KeyState {
	t.Helper()
	st, err := admin.New(p).InspectKey(t.Context(), countedKey(a))
	if err != nil {
		t.Fatalf("Inspect(%s) = %v", a, err)
	}
	return st
}

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

// countedKey is the key a protector with the default prefixes counts the
// address a under: IPv4 per address, IPv6 per /64.
func countedKey(a string) protect.Key {
	addr := netip.MustParseAddr(a)
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	pfx, _ := addr.Prefix(bits)
	return protect.Key{Prefix: pfx}
}
