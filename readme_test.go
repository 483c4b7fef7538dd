package protect

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// The README's quick start works as written: its Config, copied here, is
// checked against the README's text, and a health check from the load
// balancer's subnet is served and never counted.
func TestReadmeQuickStart(t *testing.T) {
	const config = `p, err := protect.New(protect.Config{
	TrustedProxies: []string{"10.0.0.0/8"}, // your load balancer, nothing else
	SafeNetworks:   []string{"10.0.0.0/8"}, // its health checks: served, never counted
})`
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(readme), "## Quick start")
	if start < 0 || !strings.Contains(string(readme[start:]), "```go\n"+config+"\n") {
		t.Fatalf("README.md's Quick start does not hold this test's config, want it to:\n%s", config)
	}
	p, _ := newTestProtector(t, Config{
		TrustedProxies: []string{"10.0.0.0/8"}, // your load balancer, nothing else
		SafeNetworks:   []string{"10.0.0.0/8"}, // its health checks: served, never counted
		MaxRequests:    2,                      // (the test's, to reach the limit)
	})
	send := func(peer, xff string) (int, Decision) {
		r := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/healthz", nil)
		r.RemoteAddr = peer
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		var d Decision
		h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { d, _ = FromContext(r.Context()) }))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, d
	}
	// The load balancer's own health check: no X-Forwarded-For.
	for range 5 {
		if code, d := send("10.1.2.3:40000", ""); code != 200 || d.Status != Safe {
			t.Fatalf("send(10.1.2.3, no X-Forwarded-For), the balancer's health check = %d %v, want 200 safe", code, d.Status)
		}
	}
	// A client through the load balancer is counted as itself, and a
	// client that writes a safe address into the header gets nothing for
	// it: the balancer appends the address it saw.
	for i := range 2 {
		if code, d := send("10.1.2.3:40000", "10.9.9.9, 203.0.113.7"); code != 200 || d.Status != Allowed || d.Addr.String() != "203.0.113.7" {
			t.Fatalf("send(10.1.2.3, X-Forwarded-For 10.9.9.9, 203.0.113.7) request %d = %d %v %v, want 200 allowed from 203.0.113.7", i+1, code, d.Status, d.Addr)
		}
	}
	if code, _ := send("10.1.2.3:40000", "10.9.9.9, 203.0.113.7"); code != 429 {
		t.Fatalf("send(10.1.2.3, X-Forwarded-For 10.9.9.9, 203.0.113.7) request 3 = %d, want 429", code)
	}
	// A client that connects directly is itself, whatever it writes.
	if _, d := send("198.51.100.4:5000", "10.1.2.3"); d.Status != Allowed || d.Addr.String() != "198.51.100.4" {
		t.Fatalf("send(198.51.100.4, X-Forwarded-For 10.1.2.3), a direct client = %v %v, want allowed from 198.51.100.4", d.Status, d.Addr)
	}
}
