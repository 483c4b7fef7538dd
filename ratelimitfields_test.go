package protect

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

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
