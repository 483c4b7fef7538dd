package protect

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// A walk that ends on a trusted address has found the client, as nginx's
// realip module decides: the peer itself when it sent no X-Forwarded-For,
// the leftmost entry of a chain of trusted hops only. It is Safe when
// SafeNetworks holds it (the load balancer's health check from its own
// subnet) and counted otherwise (a curl on the proxy's host). A client can
// never make itself Safe by writing a header.
func TestTrustedWalkEndsSafe(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		peer    string
		header  string // X-Forwarded-For, or Forwarded with ProxyHeader set
		want    Status
		wantFor string // Decision.Addr
	}{
		{"probe without header", Config{SafeNetworks: []string{"10.0.0.0/8"}}, "10.1.2.3:80", "", Safe, "10.1.2.3"},
		{"all hops trusted", Config{SafeNetworks: []string{"10.0.0.0/8"}}, "10.0.0.1:80", "10.0.0.3, 10.0.0.2", Safe, "10.0.0.3"},
		{"leftmost trusted hop decides", Config{SafeNetworks: []string{"10.0.0.2/32"}}, "10.0.0.1:80", "10.0.0.3, 10.0.0.2", Allowed, "10.0.0.3"},
		{"trusted, not safe", Config{SafeNetworks: []string{"192.168.0.0/16"}}, "10.1.2.3:80", "", Allowed, "10.1.2.3"},
		{"no safe networks", Config{}, "10.1.2.3:80", "", Allowed, "10.1.2.3"},
		{"ProxyCount, fewer hops, not safe", Config{SafeNetworks: []string{"192.168.0.0/16"}, ProxyCount: 2, TrustedProxies: []string{}}, "10.9.9.9:80", "10.0.0.5", Unknown, ""},
		{"garbage is never safe", Config{SafeNetworks: []string{"10.0.0.0/8"}}, "10.0.0.1:80", "10.0.0.3, garbage", Unknown, ""},
		{"garbage left of a client", Config{SafeNetworks: []string{"10.0.0.0/8"}}, "10.0.0.1:80", "garbage, 6.6.6.6", Allowed, "6.6.6.6"},
		{"a client cannot pose as safe", Config{SafeNetworks: []string{"10.0.0.0/8"}}, "10.0.0.1:80", "10.0.0.3, 6.6.6.6", Allowed, "6.6.6.6"},
		{"untrusted peer posing", Config{SafeNetworks: []string{"10.0.0.0/8"}}, "6.6.6.6:80", "10.0.0.3", Allowed, "6.6.6.6"},
		{"Forwarded, all trusted", Config{SafeNetworks: []string{"10.0.0.0/8"}, ProxyHeader: "Forwarded"}, "10.0.0.1:80", "for=10.0.0.3, for=10.0.0.2", Safe, "10.0.0.3"},
		{"ProxyCount, fewer hops", Config{SafeNetworks: []string{"10.0.0.0/8"}, ProxyCount: 2, TrustedProxies: []string{}}, "10.9.9.9:80", "10.0.0.5", Safe, "10.0.0.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg.TrustedProxies == nil {
				cfg.TrustedProxies = []string{"10.0.0.0/8"}
			}
			p, _ := newTestProtector(t, cfg)
			r := httptest.NewRequest("GET", "/health", nil)
			r.RemoteAddr = tt.peer
			if tt.header != "" {
				r.Header.Set(p.res.Header(), tt.header)
			}
			d, err := p.Verify(t.Context(), r)
			if err != nil || d.Status != tt.want || addrString(d.Addr) != tt.wantFor {
				t.Fatalf("Verify(%s) = %v for %q, %v; want %v for %q", tt.peer, d.Status, addrString(d.Addr), err, tt.want, tt.wantFor)
			}
			w := httptest.NewRecorder()
			p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})).ServeHTTP(w, r)
			if wantCode := map[bool]int{true: 200, false: 429}[tt.want != Unknown]; w.Code != wantCode {
				t.Fatalf("Middleware.ServeHTTP(%s) = %d, want %d", tt.peer, w.Code, wantCode)
			}
		})
	}
}
