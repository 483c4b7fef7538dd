package protect

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/httpprotect/protect/internal/clientaddr"
)

// addrVector is one line of testdata/clientaddr.jsonl.
type addrVector struct {
	Name    string    `json:"name"`
	Peer    string    `json:"peer"`    // default 10.0.0.1:5555
	Header  string    `json:"header"`  // default X-Forwarded-For
	Trusted *[]string `json:"trusted"` // default 10.0.0.0/8, 2001:db8:ffff::/48
	Count   int       `json:"count"`
	Unix    bool      `json:"unix"`
	Lines   []string  `json:"lines"`
	Want    string    `json:"want"` // an address, or ERR
}

func readVectors(t *testing.T) []addrVector {
	t.Helper()
	f, err := os.Open("testdata/clientaddr.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var vs []addrVector
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var v addrVector
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("clientaddr.jsonl:%d: %v", n, err)
		}
		vs = append(vs, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

// vectorProtector builds the protector a vector describes.
func vectorProtector(t *testing.T, v addrVector) *Protector {
	t.Helper()
	trusted := []string{"10.0.0.0/8", "2001:db8:ffff::/48"}
	if v.Trusted != nil {
		trusted = *v.Trusted
	}
	p, err := New(Config{TrustedProxies: trusted, ProxyHeader: v.Header, ProxyCount: v.Count, TrustUnixSocket: v.Unix, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func vectorRequest(v addrVector) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:5555"
	if v.Peer != "" {
		r.RemoteAddr = v.Peer
	}
	h := v.Header
	if h == "" {
		h = "X-Forwarded-For"
	}
	for _, l := range v.Lines {
		r.Header.Add(h, l)
	}
	return r
}

func TestClientAddrVectors(t *testing.T) {
	vs := readVectors(t)
	if len(vs) < 49 {
		t.Fatalf("len(readVectors()) = %d, want at least 49: the design's 9 and at least 40 more", len(vs))
	}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			p := vectorProtector(t, v)
			got, err := p.res.Resolve(vectorRequest(v))
			if v.Want == "ERR" {
				if err == nil {
					t.Fatalf("resolve() = %v, nil; want an unknown address", got)
				}
				if !errors.Is(err, ErrUnknownClient) {
					t.Fatalf("resolve() = %v, %v; want an error wrapping ErrUnknownClient", got, err)
				}
				// Through Verify, an unknown address is refused and never counted.
				d, _ := p.Verify(t.Context(), vectorRequest(v))
				if d.Status != Unknown || !d.Refused() || d.StatusCode() != 429 || !d.Key.IsZero() {
					t.Fatalf("Verify() = %+v, want Unknown refused with 429 and no key", d)
				}
				if n := p.store.(*MemoryStore).Len(); n != 0 {
					t.Fatalf("MemoryStore.Len() after an unknown address = %d, want 0", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("resolve() = %v, %v; want %s", got, err, v.Want)
			}
			if want := netip.MustParseAddr(v.Want); got != want {
				t.Fatalf("resolve() = %v, want %v", got, want)
			}
		})
	}
}

// TestResolveDoesNotAllocate keeps the common cases off the heap.
func TestResolveDoesNotAllocate(t *testing.T) {
	p := vectorProtector(t, addrVector{})
	r := vectorRequest(addrVector{Lines: []string{"6.6.6.6, 203.0.113.7, 10.0.0.2"}})
	if n := testing.AllocsPerRun(100, func() { p.res.Resolve(r) }); n != 0 {
		t.Fatalf("resolve() allocates %v times per call, want 0", n)
	}
}

func TestAggregationKeys(t *testing.T) {
	tests := []struct {
		v4, v6 int
		addr   string
		want   string
	}{
		{32, 64, "203.0.113.7", "203.0.113.7"},
		{32, 64, "2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"},
		{24, 64, "203.0.113.7", "203.0.113.0/24"},
		{32, 48, "2001:db8:1:2::1", "2001:db8:1::/48"},
		{32, 128, "2001:db8::1", "2001:db8::1"},
	}
	for _, tt := range tests {
		ag := clientaddr.Aggregator{V4Bits: tt.v4, V6Bits: tt.v6}
		if got := ag.Key(netip.MustParseAddr(tt.addr)).String(); got != tt.want {
			t.Errorf("Aggregator{/%d, /%d}.Key(%s) = %s, want %s", tt.v4, tt.v6, tt.addr, got, tt.want)
		}
	}
}

// FuzzResolve drives the whole resolver with a peer and two header lines,
// in each header mode. The protectors are built once, not per input.
func FuzzResolve(f *testing.F) {
	f.Add("10.0.0.1:5555", "6.6.6.6, 1.2.3.4", "10.0.0.2", uint8(0))
	f.Add("[::ffff:10.0.0.1]:1", `for="[2001:db8::1]:80"`, "for=10.0.0.3", uint8(1))
	f.Add("10.0.0.1:1", "1.2.3.4", "", uint8(2))
	f.Add("@", "1.2.3.4", "5.6.7.8", uint8(3))
	var modes []addrVector
	for _, h := range []string{"X-Forwarded-For", "Forwarded", "X-Real-IP"} {
		for _, unix := range []bool{false, true} {
			for count := range 3 {
				modes = append(modes, addrVector{Header: h, Unix: unix, Count: count})
			}
		}
	}
	var ps []*Protector
	for _, v := range modes {
		p, err := New(Config{TrustedProxies: []string{"10.0.0.0/8", "2001:db8:ffff::/48"}, ProxyHeader: v.Header,
			ProxyCount: v.Count, TrustUnixSocket: v.Unix, Logger: discardLogger()})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { p.Close() })
		ps = append(ps, p)
	}
	f.Fuzz(func(t *testing.T, peer, line1, line2 string, mode uint8) {
		i := int(mode) % len(modes)
		p := ps[i]
		// All the resolver reads: the peer and the header lines.
		r := &http.Request{RemoteAddr: peer, Header: http.Header{p.res.Header(): {line1, line2}}}
		a, err := p.res.Resolve(r)
		if err != nil {
			if !errors.Is(err, ErrUnknownClient) {
				t.Fatalf("resolve(peer %q, lines %q, %q) = %v, want an error wrapping ErrUnknownClient", peer, line1, line2, err)
			}
			return
		}
		if n, ok := clientaddr.Normalize(a); !ok || n != a {
			t.Fatalf("resolve() = %v, want a valid, normalised address (%v)", a, n)
		}
	})
}

func TestFromTrustedProxy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		remote string
		want   bool
	}{
		{"trusted peer", Config{TrustedProxies: []string{"10.0.0.0/8"}}, "10.0.0.1:5555", true},
		{"mapped trusted peer", Config{TrustedProxies: []string{"10.0.0.0/8"}}, "[::ffff:10.0.0.1]:5555", true},
		{"untrusted peer", Config{TrustedProxies: []string{"10.0.0.0/8"}}, "9.9.9.9:1234", false},
		{"no proxies", Config{}, "10.0.0.1:5555", false},
		{"proxy count, no list", Config{ProxyCount: 1}, "9.9.9.9:1234", true},
		{"proxy count and a list", Config{ProxyCount: 1, TrustedProxies: []string{"10.0.0.0/8"}}, "9.9.9.9:1234", false},
		{"unix socket trusted", Config{TrustUnixSocket: true}, "@", true},
		{"unix socket not trusted", Config{}, "@", false},
		{"garbage peer", Config{TrustedProxies: []string{"10.0.0.0/8"}}, "nonsense", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			if got := p.FromTrustedProxy(r); got != tc.want {
				t.Fatalf("FromTrustedProxy(%q) = %v, want %v", tc.remote, got, tc.want)
			}
		})
	}
}

// A host with one IPv4 address owns a 6to4 /48: rotating through its
// /64s is still one client, and the lists and ban targets that name one of
// its addresses name that client.
func TestSixToFourIsOneClient(t *testing.T) {
	ctx := t.Context()
	p, _ := newTestProtector(t, Config{MaxRequests: 3, SafeNetworks: []string{"2002:cb00:7109::1"}})
	var statuses []Status
	for i := range 5 {
		a := netip.AddrFrom16([16]byte{0x20, 0x02, 192, 0, 2, 4, 0, byte(i + 1), 15: 1})
		d, _ := p.VerifyAddr(ctx, a)
		if d.Key.String() != "192.0.2.4" || d.Addr != netip.MustParseAddr("192.0.2.4") {
			t.Fatalf("VerifyAddr(%v) = key %v addr %v, want 192.0.2.4", a, d.Key, d.Addr)
		}
		statuses = append(statuses, d.Status)
	}
	if statuses[2] != Allowed || statuses[3] != Limited || statuses[4] != Limited {
		t.Fatalf("VerifyAddr of five /64s of one 6to4 host = %v, want the 4th and 5th limited", statuses)
	}

	if d, _ := p.VerifyAddr(ctx, netip.MustParseAddr("203.0.113.9")); d.Status != Safe {
		t.Fatalf("VerifyAddr(203.0.113.9), the IPv4 host of a safe 6to4 address = %v, want Safe", d.Status)
	}

	k, isRange, err := p.target("2002:c633:6401:7::1")
	if err != nil || isRange || k.String() != "198.51.100.1" {
		t.Fatalf("Target(2002:c633:6401:7::1) = %v %v %v, want 198.51.100.1", k, isRange, err)
	}
	if _, err := p.Ban(ctx, "2002:c633:6401:7::1", BanOptions{}); err != nil {
		t.Fatal(err)
	}
	if d, _ := p.VerifyAddr(ctx, netip.MustParseAddr("198.51.100.1")); d.Status != Banned {
		t.Fatalf("VerifyAddr(198.51.100.1) after a ban on its 6to4 address = %v, want Banned", d.Status)
	}
}

// A CIDR inside 6to4, NAT64 or Teredo holds no client: each resolves to
// the IPv4 address it embeds. A ban on one would be listed and never
// hold, so it is refused with the IPv4 range meant, where there is one;
// one whose clients stay IPv6 (a private embedded address) is taken.
func TestTunnelRangeTargets(t *testing.T) {
	p, _ := newTestProtector(t, Config{})
	ctx := t.Context()
	for _, c := range []struct{ target, hint string }{
		{"2002:c000:204::/48", "192.0.2.4/32"}, // one 6to4 host's /48
		{"2002:c000:204:1::/64", "192.0.2.4/32"},
		{"2002:c000:200::/40", "192.0.2.0/24"},
		{"2002::/16", "0.0.0.0/0"},
		{"64:ff9b::c000:200/120", "192.0.2.0/24"},
		{"2001:0:4136:e378::/64", "IPv4 range"},
	} {
		_, err := p.Ban(ctx, c.target, BanOptions{Force: true})
		if !errors.Is(err, ErrBadTarget) || !strings.Contains(err.Error(), c.hint) || !strings.Contains(err.Error(), strconv.Quote(c.target)) {
			t.Errorf("Ban(%q) = %v; want ErrBadTarget quoting it and naming %s", c.target, err, c.hint)
		}
	}
	if got := bannedKeys(t, p); len(got) != 0 {
		t.Fatalf("bannedKeys() after refused bans = %v, want none", got)
	}
	if _, err := p.Ban(ctx, "2002:a00::/24", BanOptions{}); err != nil { // 10.0.0.0/8 inside: those clients stay IPv6
		t.Fatalf("Ban(2002:a00::/24) = %v, want nil", err)
	}
	if d, _ := p.VerifyAddr(ctx, netip.MustParseAddr("2002:a00:3::1")); d.Status != Banned {
		t.Fatalf("VerifyAddr(2002:a00:3::1) inside a banned 6to4 range of private addresses = %v, want Banned", d.Status)
	}
}

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
