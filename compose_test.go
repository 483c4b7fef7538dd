package protect

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// storesUnderTest makes a fresh shared store of each kind that every
// store test here runs on: memory, and a store outside the process
// (remoteStore), which the Protector guards. Package redisstore runs the
// same on Redis.
var storesUnderTest = []struct {
	name string
	make func(t *testing.T) Store
}{
	{"memory", func(t *testing.T) Store {
		s := NewMemoryStore(MemoryOptions{})
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"remote", func(t *testing.T) Store {
		s := remoteStore{NewMemoryStore(MemoryOptions{})}
		t.Cleanup(func() { s.Close() })
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
				t.Fatalf("api.VerifyAddr(%s) = %v, want banned by the login guard's ban", a, d.Status)
			}
			if d, _ := apart.VerifyAddr(t.Context(), a); d.Status != Allowed {
				t.Fatalf("apart.VerifyAddr(%s) = %v, want allowed: it has a ban list of its own", a, d.Status)
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
				t.Fatalf("dry.VerifyAddr(%s) × 5 = %v, want %s", a, got, want)
			}
			if d, _ := live.VerifyAddr(t.Context(), a); d.Status != Allowed {
				t.Fatalf("live.VerifyAddr(%s) = %v, want allowed: the dry run must not have banned the client", a, d.Status)
			}
			for _, p := range []*Protector{dry, live} {
				if bans, err := p.Bans(t.Context(), BanFilter{}); err != nil || len(bans) != 0 {
					t.Fatalf("Bans() = %v, %v; want none", bans, err)
				}
			}
			if n := logs.Count("protect: dry run: would ban"); n != 1 {
				t.Fatalf("logs.Count(%q) = %d, want 1", "protect: dry run: would ban", n)
			}
		})
	}
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
		t.Errorf("Header().Values(RateLimit-Policy) = %s, want %s", got, want)
	}
	if got, want := fmt.Sprintf("%q", w.Header().Values("RateLimit")), `["\"addr\";r=18;t=10" "\"key\";r=1;t=10"]`; got != want {
		t.Errorf("Header().Values(RateLimit) = %s, want %s", got, want)
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
		t.Errorf("Values(RateLimit) after d3.WriteHeaders, d2.WriteHeaders = %s, want %s", got, want)
	}
	// The default name is the default namespace's.
	p, _ := newTestProtector(t, Config{})
	d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.72"))
	hdr = http.Header{}
	d.WriteHeaders(hdr)
	if got := hdr.Get("RateLimit-Policy"); got != `"protect";q=200;w=10` {
		t.Errorf("Get(RateLimit-Policy) with the default Name = %s, want %s", got, `"protect";q=200;w=10`)
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
		t.Errorf("New(Config{Name: %q}) = %v, want an error that quotes it", "Bad Name", err)
	}
}
