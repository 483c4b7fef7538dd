package protect

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// storesUnderTest makes a fresh shared store of each kind that every
// store test here runs on: memory and miniredis.
var storesUnderTest = []struct {
	name string
	make func(t *testing.T) Store
}{
	{"memory", func(t *testing.T) Store {
		s := NewMemoryStore(MemoryOptions{})
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"miniredis", func(t *testing.T) Store {
		c := dial(miniredis.RunT(t).Addr())
		s := NewRedisStore(c, RedisOptions{RangeRefresh: -1, Logger: discardLogger()})
		t.Cleanup(func() { s.Close(); c.Close() })
		return s
	}},
}

// One ban list: a client banned by the login guard is refused by the API,
// which counts under another namespace, because both read the default
// BanNamespace; a protector with a BanNamespace of its own does not see it.
func TestOneBanListAcrossNamespaces(t *testing.T) {
	for _, st := range storesUnderTest {
		t.Run(st.name, func(t *testing.T) {
			s := st.make(t)
			login, _ := newTestProtector(t, Config{Store: s, Namespace: "login:", MaxRequests: 1, BanLimit: 2})
			api, _ := newTestProtector(t, Config{Store: s, Namespace: "api:", MaxRequests: 100})
			apart, _ := newTestProtector(t, Config{Store: s, Namespace: "canary:", BanNamespace: "canary:", MaxRequests: 100})
			a := netip.MustParseAddr("192.0.2.50")
			for range 3 {
				login.VerifyAddr(t.Context(), a)
			}
			if d, _ := api.VerifyAddr(t.Context(), a); d.Status != Banned {
				t.Fatalf("api: %v; want banned by the login guard's ban", d.Status)
			}
			if d, _ := apart.VerifyAddr(t.Context(), a); d.Status != Allowed {
				t.Fatalf("a protector with its own ban list: %v; want allowed", d.Status)
			}
		})
	}
}

// A dry-run protector never writes a ban that a live protector on the same
// store enforces: it decides "would ban" (logged once), sets the headers,
// refuses nothing, and the live protector keeps serving the client.
func TestDryRunWritesNoBan(t *testing.T) {
	for _, st := range storesUnderTest {
		t.Run(st.name, func(t *testing.T) {
			s := st.make(t)
			logs := &recorder{}
			dry, _ := newTestProtector(t, Config{Store: s, Namespace: "canary:", MaxRequests: 1, BanLimit: 2, DryRun: true, Logger: slog.New(logs)})
			live, _ := newTestProtector(t, Config{Store: s, Namespace: "live:", MaxRequests: 100})
			a := netip.MustParseAddr("192.0.2.60")
			var got []string
			for range 5 {
				d, _ := dry.VerifyAddr(t.Context(), a)
				got = append(got, fmt.Sprintf("%v/%v/%d", d.Status, d.Refused(), d.StatusCode()))
			}
			if want := "[allowed/false/200 limited/false/200 banned/false/200 banned/false/200 banned/false/200]"; fmt.Sprint(got) != want {
				t.Fatalf("dry run: %v; want %s", got, want)
			}
			if d, _ := live.VerifyAddr(t.Context(), a); d.Status != Allowed {
				t.Fatalf("live protector: %v; want allowed: the dry run must not have banned the client", d.Status)
			}
			for _, p := range []*Protector{dry, live} {
				if bans, err := p.Bans(t.Context(), BanFilter{}); err != nil || len(bans) != 0 {
					t.Fatalf("bans %v %v; want none", bans, err)
				}
			}
			if n := logs.count("protect: dry run: would ban"); n != 1 {
				t.Fatalf("%d \"would ban\" lines; want 1", n)
			}
		})
	}
}

// count returns how many records have message msg.
func (h *recorder) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r["msg"] == msg {
			n++
		}
	}
	return n
}

// Nested protectors each add their item to the RateLimit fields, under
// their own Config.Name (from Namespace by default), never overwriting
// the outer one's; a protector writing again replaces its own item.
func TestNestedRateLimitFields(t *testing.T) {
	outer, _ := newTestProtector(t, Config{Namespace: "addr:", MaxRequests: 20})
	inner, _ := newTestProtector(t, Config{Namespace: "key:", MaxRequests: 3, KeyFunc: func(*http.Request) (string, bool) { return "acme", true }})
	h := outer.Middleware(inner.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	var w *httptest.ResponseRecorder
	for range 2 {
		w = httptest.NewRecorder()
		h.ServeHTTP(w, request("192.0.2.70:1"))
	}
	if got, want := fmt.Sprintf("%q", w.Header().Values("RateLimit-Policy")), `["\"addr\";q=20;w=10" "\"key\";q=3;w=10"]`; got != want {
		t.Errorf("RateLimit-Policy %s; want %s", got, want)
	}
	if got, want := fmt.Sprintf("%q", w.Header().Values("RateLimit")), `["\"addr\";r=18;t=10" "\"key\";r=1;t=10"]`; got != want {
		t.Errorf("RateLimit %s; want %s", got, want)
	}
	// The same protector's decision written twice: one item, the last.
	d1, _ := outer.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.71"))
	d2, _ := outer.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.71"))
	hdr := http.Header{}
	d1.WriteHeaders(hdr)
	inner.VerifyKey(t.Context(), "acme")
	d3, _ := inner.VerifyKey(t.Context(), "globex")
	d3.WriteHeaders(hdr)
	d2.WriteHeaders(hdr)
	if got, want := fmt.Sprintf("%q", hdr.Values("RateLimit")), `["\"key\";r=2;t=10" "\"addr\";r=18;t=10"]`; got != want {
		t.Errorf("rewritten: RateLimit %s; want %s", got, want)
	}
	// The default name is the default namespace's.
	p, _ := newTestProtector(t, Config{})
	d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.72"))
	hdr = http.Header{}
	d.WriteHeaders(hdr)
	if got := hdr.Get("RateLimit-Policy"); got != `"protect";q=200;w=10` {
		t.Errorf("default policy %s", got)
	}
}

func TestPolicyName(t *testing.T) {
	for ns, want := range map[string]string{
		"protect:": "protect", "login:": "login", "API:v2:": "api-v2", "123:": "protect", "a{b}:": "a-b-",
	} {
		if got := policyName(ns); got != want {
			t.Errorf("policyName(%q) = %q; want %q", ns, got, want)
		}
	}
	if _, err := New(Config{Name: "Bad Name"}); err == nil || !strings.Contains(err.Error(), `"Bad Name"`) {
		t.Errorf("a bad Name: %v; want an error that quotes it", err)
	}
}

// A service publishes its limits under its namespace once it has counted
// a request, and warns loudly when another instance (another store value,
// as another process has) already published other ones for it; within
// one store value the second set of limits is an error. A protector that
// only checks (protectctl) and a dry run publish nothing.
func TestServicePublishesLimits(t *testing.T) {
	m := miniredis.RunT(t)
	logs := &recorder{}
	const warning = "protect: LIMITS DIFFER: another instance counts this namespace with other limits; the counters are shared, so neither set holds. Give each protector its own Namespace."
	// newInstance turns publishing off, for tests that count round trips.
	instance := func(cfg Config) *instance {
		in := newInstance(t, m.Addr(), "svc:", cfg, RedisOptions{RangeRefresh: -1})
		in.p.publishing.Store(publishPending)
		return in
	}
	a := instance(Config{MaxRequests: 250})
	published := func() (Limits, bool) {
		lim, ok, err := a.store.Published(t.Context(), "svc:")
		if err != nil {
			t.Fatal(err)
		}
		return lim, ok
	}
	a.p.Check(t.Context(), request("192.0.2.1:1"))
	a.p.Close() // waits for what runs in the background
	if _, ok := published(); ok {
		t.Fatal("a protector that only checked published its limits")
	}
	a = instance(Config{MaxRequests: 250})
	a.p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1"))
	a.p.Close()
	if lim, ok := published(); !ok || lim.MaxRequests != 250 || lim.BanLimit != 1250 {
		t.Fatalf("published %+v %v; want MaxRequests 250, BanLimit 1250", lim, ok)
	}
	for _, tt := range []struct {
		max      int64
		warnings int
	}{{250, 0}, {100, 1}} {
		b := instance(Config{MaxRequests: tt.max, Logger: slog.New(logs)})
		b.p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1"))
		b.p.Close()
		if n := logs.count(warning); n != tt.warnings {
			t.Fatalf("MaxRequests %d after 250: %d warnings; want %d", tt.max, n, tt.warnings)
		}
	}
	dry, err := New(Config{Store: a.store, Namespace: "dry:", MaxRequests: 7, DryRun: true, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	dry.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1"))
	dry.Close()
	if _, ok, _ := a.store.Published(t.Context(), "dry:"); ok {
		t.Fatal("a dry run published limits")
	}
	// One store value, one namespace, two sets of limits: an error.
	// (a.store counts "svc:" with MaxRequests 250.)
	_, err = New(Config{Store: a.store, Namespace: "svc:", MaxRequests: 100, Logger: discardLogger()})
	if !errors.Is(err, ErrLimitsDiffer) || !errors.Is(err, ErrConfig) {
		t.Fatalf("a second set of limits on one store: %v", err)
	}
}
