package protect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/logtest"
	"github.com/httpprotect/protect/store"
)

// tally counts decisions by status.
type tally map[Status]int

func (tl tally) String() string {
	return fmt.Sprintf("allowed %d, limited %d, banned %d, other %d",
		tl[Allowed], tl[Limited], tl[Banned], tl[Safe]+tl[Unknown]+tl[Unavailable])
}

func request(peer string, xff ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = peer
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	return r
}

func verify(t *testing.T, p *Protector, r *http.Request) Decision {
	t.Helper()
	d, err := p.Verify(t.Context(), r)
	if err != nil {
		t.Fatalf("Verify(%s) = %v, want nil", r.RemoteAddr, err)
	}
	return d
}

// The exactness bar: MaxRequests 100, BanLimit 250, 300 requests from one
// address give exactly 100 served, 150 limited and 50 banned, whether they
// come one by one or all at once.
func TestExactCounts(t *testing.T) {
	for _, concurrent := range []bool{false, true} {
		t.Run(fmt.Sprintf("concurrent=%v", concurrent), func(t *testing.T) {
			p, _ := newTestProtector(t, Config{MaxRequests: 100, BanLimit: 250})
			addr := netip.MustParseAddr("203.0.113.7")
			got := sendAll(t, 300, concurrent, func(int) (Decision, error) { return p.VerifyAddr(t.Context(), addr) })
			if got[Allowed] != 100 || got[Limited] != 150 || got[Banned] != 50 || len(got) != 3 {
				t.Fatalf("VerifyAddr(%s) × 300 = %v, want allowed 100, limited 150, banned 50", addr, got)
			}
			bans, err := p.bans(t.Context(), BanFilter{})
			if err != nil || len(bans) != 1 || bans[0].Key.String() != "203.0.113.7" || bans[0].Source != SourceAuto {
				t.Fatalf("Bans() = %+v, %v; want one automatic ban on 203.0.113.7", bans, err)
			}
		})
	}
}

// The stream counter measures a stream, not a rate: it is forgotten only
// after TTL of silence. The two worked examples of the background article.
func TestStreamSemantics(t *testing.T) {
	tests := []struct {
		max       int64
		ttl, gap  time.Duration
		firstDeny int
	}{
		{max: 5, ttl: 3 * time.Second, gap: 2500 * time.Millisecond, firstDeny: 6},
		{max: 20, ttl: 10 * time.Second, gap: 500 * time.Millisecond, firstDeny: 21},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("max=%d,ttl=%v,gap=%v", tt.max, tt.ttl, tt.gap), func(t *testing.T) {
			p, clk := newTestProtector(t, Config{MaxRequests: tt.max, TTL: tt.ttl})
			addr := netip.MustParseAddr("198.51.100.9")
			for i := 1; i <= tt.firstDeny; i++ {
				d, _ := p.VerifyAddr(t.Context(), addr)
				if refused := d.Refused(); refused != (i == tt.firstDeny) {
					t.Fatalf("VerifyAddr(%s) request %d = %v (count %d), refused %v; want refused %v", addr, i, d.Status, d.Count, refused, i == tt.firstDeny)
				}
				clk.Advance(tt.gap)
			}
			// A pause just longer than TTL starts the stream over.
			clk.Advance(tt.ttl - tt.gap + time.Millisecond)
			d, _ := p.VerifyAddr(t.Context(), addr)
			if d.Status != Allowed || d.Count != 1 {
				t.Fatalf("VerifyAddr(%s) after a pause = %v count %d, want allowed with count 1", addr, d.Status, d.Count)
			}
		})
	}
}

// Attacks from the background articles.
func TestForgedHeaders(t *testing.T) {
	const proxy = "127.0.0.1:40000"
	cfg := Config{MaxRequests: 100, BanLimit: 250, TrustedProxies: []string{"127.0.0.1"}, SafeNetworks: []string{"10.0.0.0/8"}}

	t.Run("a new forged header per request is counted as the peer", func(t *testing.T) {
		p, _ := newTestProtector(t, cfg)
		got := tally{}
		for i := range 1000 {
			d := verify(t, p, request("127.0.0.2:5000", fmt.Sprintf("198.18.%d.%d", i/250, i%250)))
			if d.Key.String() != "127.0.0.2" && d.Status != Banned {
				t.Fatalf("Verify(127.0.0.2 forging a new header) request %d = %v counted as %q, want counted as 127.0.0.2", i, d.Status, d.Key)
			}
			got[d.Status]++
		}
		if got[Allowed] != 100 || got[Limited] != 150 || got[Banned] != 750 {
			t.Fatalf("Verify(127.0.0.2 forging a new header) × 1000 = %v, want allowed 100, limited 150, banned 750", got)
		}
		if n := p.store.(*MemoryStore).Len(); n > 1 {
			t.Fatalf("MemoryStore.Len() = %d, want at most 1: forged headers must not create counters", n)
		}
	})

	t.Run("naming a customer bans the attacker, never the customer", func(t *testing.T) {
		p, _ := newTestProtector(t, cfg)
		for range 260 {
			verify(t, p, request("127.0.0.2:5000", "203.0.113.7"))
		}
		if d := verify(t, p, request("127.0.0.2:5000", "203.0.113.7")); d.Status != Banned || d.Key.String() != "127.0.0.2" {
			t.Fatalf("Verify(the attacker 127.0.0.2) = %v %q, want banned as 127.0.0.2", d.Status, d.Key)
		}
		for i := range 3 {
			if d := verify(t, p, request(proxy, "203.0.113.7")); d.Status != Allowed || d.Key.String() != "203.0.113.7" || d.Count != int64(i+1) {
				t.Fatalf("Verify(customer 203.0.113.7 through the proxy) request %d = %v %q count %d, want allowed as 203.0.113.7, count %d", i+1, d.Status, d.Key, d.Count, i+1)
			}
		}
		// Through the proxy, a forged entry left of the proxy's own is not believed either.
		for range 260 {
			verify(t, p, request(proxy, "203.0.113.7, 198.51.100.66"))
		}
		if d := verify(t, p, request(proxy, "203.0.113.7")); d.Status != Allowed {
			t.Fatalf("Verify(customer 203.0.113.7) after a forged flood through the proxy = %v, want allowed", d.Status)
		}
		bans, _ := p.bans(t.Context(), BanFilter{})
		var keys []string
		for _, b := range bans {
			keys = append(keys, b.Key.String())
		}
		if strings.Join(keys, ",") != "127.0.0.2,198.51.100.66" && strings.Join(keys, ",") != "198.51.100.66,127.0.0.2" {
			t.Fatalf("Bans() keys = %v, want the attacker's two addresses only", keys)
		}
	})

	t.Run("claiming a safe network from outside is counted", func(t *testing.T) {
		p, _ := newTestProtector(t, cfg)
		got := tally{}
		for range 300 {
			got[verify(t, p, request("127.0.0.2:5000", "10.0.0.5")).Status]++
		}
		if got[Safe] != 0 || got[Allowed] != 100 {
			t.Fatalf("Verify(127.0.0.2 claiming 10.0.0.5) × 300 = %v (%d safe), want 100 allowed, none safe: the claim must be counted", got, got[Safe])
		}
		if d := verify(t, p, request(proxy, "10.0.0.5")); d.Status != Safe {
			t.Fatalf("Verify(10.0.0.5 through the proxy), a real safe client = %v, want safe", d.Status)
		}
	})

	t.Run("10,000 addresses in one /64 are one client", func(t *testing.T) {
		p, _ := newTestProtector(t, Config{MaxRequests: 100, BanLimit: 250})
		got := tally{}
		for i := range 10000 {
			a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, byte(i >> 8), byte(i), 0xaa, 0, 0, 0, byte(i >> 3), byte(i)})
			d, _ := p.VerifyAddr(t.Context(), a)
			if d.Key.String() != "2001:db8:1:2::/64" {
				t.Fatalf("VerifyAddr(%v).Key = %q, want 2001:db8:1:2::/64", a, d.Key)
			}
			got[d.Status]++
		}
		if got[Allowed] != 100 || got[Limited] != 150 || got[Banned] != 9750 {
			t.Fatalf("VerifyAddr × 10000 in one /64 = %v, want allowed 100, limited 150, banned 9750", got)
		}
	})
}

// Node reports IPv4 clients as ::ffff:a.b.c.d; such a peer must match
// an IPv4 safe network and an IPv4 ban.
func TestMappedPeer(t *testing.T) {
	const peer = "[::ffff:127.0.0.1]:5555"
	p, _ := newTestProtector(t, Config{SafeNetworks: []string{"127.0.0.1"}})
	if d := verify(t, p, request(peer)); d.Status != Safe || d.Addr != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("Verify(%s) = %v %v, want safe 127.0.0.1", peer, d.Status, d.Addr)
	}
	p, _ = newTestProtector(t, Config{})
	if _, err := p.Ban(t.Context(), "127.0.0.1", BanOptions{For: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if d := verify(t, p, request(peer)); d.Status != Banned || d.Key.String() != "127.0.0.1" {
		t.Fatalf("Verify(%s) after Ban(127.0.0.1) = %v %q, want banned on 127.0.0.1", peer, d.Status, d.Key)
	}
	// A range ban written in mapped form matches too.
	p, _ = newTestProtector(t, Config{})
	if _, err := p.Ban(t.Context(), "::ffff:127.0.0.0/104", BanOptions{For: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if d := verify(t, p, request(peer)); d.Status != Banned {
		t.Fatalf("Verify(%s) after Ban(::ffff:127.0.0.0/104) = %v, want banned", peer, d.Status)
	}
}

func TestBanLifecycle(t *testing.T) {
	p, clk := newTestProtector(t, Config{MaxRequests: 2, BanLimit: 3, BanDuration: time.Hour, BanFactor: 2, MaxBanDuration: 3 * time.Hour})
	addr := netip.MustParseAddr("192.0.2.1")
	// offend sends requests until the first ban and returns its decision.
	offend := func() Decision {
		t.Helper()
		for range 4 {
			d, _ := p.VerifyAddr(t.Context(), addr)
			if d.Status == Banned {
				return d
			}
		}
		t.Fatalf("VerifyAddr(%s) × 4 = no ban, want banned past BanLimit", addr)
		return Decision{}
	}
	wants := []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour, 3 * time.Hour} // the cap holds
	for i, want := range wants {
		d := offend()
		if d.RetryAfter != want || !d.BanExpires.Equal(clk.Now().Add(want)) {
			t.Fatalf("ban %d: VerifyAddr(%s).RetryAfter = %v, BanExpires %v; want %v from now", i+1, addr, d.RetryAfter, d.BanExpires, want)
		}
		// Retry-After counts down with the clock.
		clk.Advance(10*time.Minute + 500*time.Millisecond)
		d, _ = p.VerifyAddr(t.Context(), addr)
		h := http.Header{}
		d.WriteHeaders(h)
		if wantSecs := fmt.Sprint(seconds(want - 10*time.Minute - 500*time.Millisecond)); h.Get("Retry-After") != wantSecs {
			t.Fatalf("ban %d: VerifyAddr(%s) Retry-After = %q, want %s", i+1, addr, h.Get("Retry-After"), wantSecs)
		}
		// The ban expires by itself.
		clk.Advance(want - 10*time.Minute)
		if d, _ := p.VerifyAddr(t.Context(), addr); d.Status != Allowed || d.Count != 1 {
			t.Fatalf("VerifyAddr(%s) after ban %d expires = %v count %d, want allowed, count 1", addr, i+1, d.Status, d.Count)
		}
	}
	// Outside the offense window the length starts over.
	clk.Advance(DefaultOffenseWindow)
	if d := offend(); d.RetryAfter != time.Hour {
		t.Fatalf("RetryAfter of the ban after the offense window = %v, want 1h", d.RetryAfter)
	}
	// A lift takes effect on the next request.
	lifted, err := p.Lift(t.Context(), "192.0.2.1", "test")
	if err != nil || len(lifted) != 1 {
		t.Fatalf("Lift(192.0.2.1) = %v, %v; want one ban", lifted, err)
	}
	if d, _ := p.VerifyAddr(t.Context(), addr); d.Status != Allowed || d.Count != 1 {
		t.Fatalf("VerifyAddr(%s) after the lift = %v count %d, want allowed, count 1", addr, d.Status, d.Count)
	}
}

func TestManualBans(t *testing.T) {
	p, clk := newTestProtector(t, Config{})
	ctx := t.Context()
	if _, err := p.Ban(ctx, "198.51.100.0/24", BanOptions{For: time.Hour, Reason: "scanner", By: "ops"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ban(ctx, "2001:db8:1:2::99", BanOptions{Permanent: true}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		addr string
		want Status
	}{
		{"198.51.100.7", Banned}, {"198.51.101.7", Allowed},
		{"2001:db8:1:2::5", Banned}, {"2001:db8:1:3::5", Allowed},
	} {
		d, _ := p.VerifyAddr(ctx, netip.MustParseAddr(tt.addr))
		if d.Status != tt.want {
			t.Errorf("VerifyAddr(%s) = %v, want %v", tt.addr, d.Status, tt.want)
		}
		if d.Status == Banned && strings.HasPrefix(tt.addr, "2001") && (d.RetryAfter != 0 || !d.BanExpires.IsZero()) {
			t.Errorf("VerifyAddr(%s) under a permanent ban: RetryAfter %v, BanExpires %v; want 0, zero", tt.addr, d.RetryAfter, d.BanExpires)
		}
	}
	bans, _ := p.bans(ctx, BanFilter{})
	if len(bans) != 2 || bans[0].Key.String() != "198.51.100.0/24" || !bans[0].Range || bans[0].By != "ops" || bans[0].Reason != "scanner" ||
		bans[1].Key.String() != "2001:db8:1:2::/64" || !bans[1].Permanent() {
		t.Fatalf("Bans() = %+v, want 198.51.100.0/24 by ops for scanner, and 2001:db8:1:2::/64 permanent", bans)
	}
	// Permanent bans outlive any clock; range bans expire.
	clk.Advance(365 * 24 * time.Hour)
	bans, _ = p.bans(ctx, BanFilter{})
	if len(bans) != 1 || !bans[0].Permanent() {
		t.Fatalf("Bans() after a year = %+v, want the permanent ban alone", bans)
	}
	// Lifting a CIDR lifts every ban inside it.
	p.Ban(ctx, "198.51.100.0/25", BanOptions{})
	p.Ban(ctx, "198.51.100.200", BanOptions{})
	lifted, err := p.Lift(ctx, "198.51.100.0/24", "ops")
	if err != nil || len(lifted) != 2 {
		t.Fatalf("Lift(198.51.100.0/24) = %+v, %v; want the two bans inside it", lifted, err)
	}
	for _, target := range []string{"garbage", "1.2.3.4/33", "10.0.0.0/", "0.0.0.0"} {
		if _, err := p.Ban(ctx, target, BanOptions{}); !errors.Is(err, ErrBadTarget) || !strings.Contains(err.Error(), target) {
			t.Errorf("Ban(%q) = %v; want ErrBadTarget quoting it", target, err)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		quote string
	}{
		{"CIDR without bits", Config{TrustedProxies: []string{"10.0.0.0/"}}, `"10.0.0.0/"`},
		{"bits out of range", Config{SafeNetworks: []string{"1.2.3.4/33"}}, `"1.2.3.4/33"`},
		{"garbage", Config{SafeNetworks: []string{"10.0.0.0/8", "garbage"}}, `"garbage"`},
		{"host bits", Config{TrustedProxies: []string{"10.0.0.1/8"}}, `"10.0.0.1/8"`},
		{"empty entry", Config{TrustedProxies: []string{""}}, `""`},
		{"negative TTL", Config{TTL: -time.Second}, "TTL -1s"},
		{"negative MaxRequests", Config{MaxRequests: -1}, "MaxRequests -1"},
		{"factor below 1", Config{BanFactor: 0.5}, "BanFactor 0.5"},
		{"cap below first ban", Config{BanDuration: 2 * time.Hour, MaxBanDuration: time.Hour}, "MaxBanDuration 1h0m0s"},
		{"IPv6 prefix", Config{IPv6Prefix: 129}, "IPv6Prefix 129"},
		{"header name", Config{ProxyHeader: "X Forwarded"}, `"X Forwarded"`},
		{"ban status", Config{BanStatus: 200}, "BanStatus 200"},
		{"namespace with a hash tag", Config{Namespace: "app{1}:"}, `"app{1}:"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.cfg)
			if err == nil {
				p.Close()
				t.Fatalf("New(%+v) = nil error, want ErrConfig", tt.cfg)
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.quote) || strings.Count(err.Error(), "protect:") != 1 {
				t.Fatalf("New(%+v) = %q, want ErrConfig quoting %s, \"protect:\" said once", tt.cfg, err, tt.quote)
			}
		})
	}
	p, err := New(Config{TrustedProxies: []string{"192.0.2.15", "2001:db8::1", " 10.0.0.0/8 "}, SafeNetworks: []string{"::ffff:198.51.100.0/120"}})
	if err != nil {
		t.Fatalf("New(bare addresses, a mapped CIDR) = %v, want nil", err)
	}
	defer p.Close()
	if !p.res.TrustedEnd(netip.MustParseAddr("192.0.2.15")) || p.res.TrustedEnd(netip.MustParseAddr("192.0.2.16")) ||
		!p.IsSafe(netip.MustParseAddr("198.51.100.77")) {
		t.Fatal("trusted.contains(192.0.2.15), !trusted.contains(192.0.2.16), safe.contains(198.51.100.77) = not all true, want bare addresses and mapped CIDRs honoured")
	}
}

func TestConsumerKeys(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 3})
	ctx := t.Context()
	for i := 1; i <= 4; i++ {
		d, _ := p.VerifyKey(ctx, "cus_alpha")
		if d.Key.String() != "cus_alpha" || d.Refused() != (i == 4) {
			t.Fatalf("VerifyKey(cus_alpha) request %d = %v %q, want counted as cus_alpha, refused at the 4th", i, d.Status, d.Key)
		}
	}
	if d, _ := p.VerifyKey(ctx, "cus_bravo"); d.Status != Allowed || d.Count != 1 {
		t.Fatalf("VerifyKey(cus_bravo) = %v count %d, want allowed, count 1", d.Status, d.Count)
	}
	for _, secret := range []string{"sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_test_abc", "ghp_0123456789abcdefABCDEF0123456789abcd", "a key with spaces", strings.Repeat("x", 33), "{slot}"} {
		d, _ := p.VerifyKey(ctx, secret)
		if k := d.Key.String(); d.Key.Name != k || strings.Contains(k, secret) || len(k) != 33 || k[0] != '~' {
			t.Errorf("VerifyKey(%q).Key = %q, want a hash", secret, k)
		}
	}
	// An id shaped like an address is kept as "~" and itself: never the
	// address's key, and ParseKey reads it back. A longer one is hashed.
	for _, tt := range []struct{ id, want string }{
		{"203.0.113.7", "~203.0.113.7"},
		{"2001:db8::1", "~2001:db8::1"},
		{"10.0.0.0/8", "~10.0.0.0/8"},
		{"2001:db8:1:2:3:4:5:6/128", "~2001:db8:1:2:3:4:5:6/128"},
	} {
		d, _ := p.VerifyKey(ctx, tt.id)
		back, err := ParseKey(d.Key.String())
		if d.Key.Name != tt.want || d.Key.Prefix.IsValid() || err != nil || back != d.Key {
			t.Errorf("VerifyKey(%q).Key = %+v, ParseKey of it %+v, %v; want name %q, read back", tt.id, d.Key, back, err, tt.want)
		}
	}
	// Hex digits with dots or colons that are no address are a token's
	// shape: hashed, as before address-shaped ids were kept.
	for _, secret := range []string{"0123456789abcdef.0123456789abcde", "deadbeef:cafebabe:0123456789abcd", "dead.beef"} {
		if d, _ := p.VerifyKey(ctx, secret); len(d.Key.Name) != 33 || d.Key.Name[0] != '~' || strings.ContainsAny(d.Key.Name, ".:") {
			t.Errorf("VerifyKey(%q).Key = %q, want a hash", secret, d.Key.Name)
		}
	}
	// An address of more than 32 bytes: hashed by its length alone.
	if d, _ := p.VerifyKey(ctx, "2001:db8:1111:2222:3333:4444:5555:6666"); len(d.Key.Name) != 33 || d.Key.Name[0] != '~' || strings.Contains(d.Key.Name, ":") {
		t.Errorf("VerifyKey(a 38-byte address).Key = %q, want a hash", d.Key.Name)
	}
	if d, _ := p.VerifyKey(ctx, ""); d.Status != Unknown || !d.Refused() {
		t.Fatalf("VerifyKey(\"\") = %v, want unknown, refused", d.Status)
	}
}

func TestKeyFunc(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 2, KeyFunc: func(r *http.Request) (string, bool) {
		k := r.Header.Get("X-Consumer")
		return k, k != ""
	}})
	r := request("192.0.2.1:1")
	r.Header.Set("X-Consumer", "acme")
	if d := verify(t, p, r); d.Key.String() != "acme" || d.Addr != netip.MustParseAddr("192.0.2.1") {
		t.Fatalf("Verify(192.0.2.1, X-Consumer acme) = key %q addr %v, want acme from 192.0.2.1", d.Key, d.Addr)
	}
	if d := verify(t, p, request("192.0.2.1:1")); d.Key.String() != "192.0.2.1" || d.Count != 1 {
		t.Fatalf("Verify(192.0.2.1), no consumer = key %q count %d, want the address, count 1", d.Key, d.Count)
	}
}

func TestDryRun(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 1, BanLimit: 2, DryRun: true})
	addr := netip.MustParseAddr("192.0.2.1")
	want := []Status{Allowed, Limited, Banned, Banned}
	for i, w := range want {
		d, _ := p.VerifyAddr(t.Context(), addr)
		h := http.Header{}
		d.WriteHeaders(h)
		if d.Status != w || d.Refused() || d.StatusCode() != 200 || h.Get("Ratelimit-Policy") == "" || h.Get("Retry-After") != "" {
			t.Fatalf("VerifyAddr(%s) request %d in a dry run = %v refused=%v code %d headers %v; want %v, not refused, 200, a policy and no Retry-After", addr, i+1, d.Status, d.Refused(), d.StatusCode(), h, w)
		}
	}
}

func TestMiddlewareCoversEveryPath(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 2})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /things", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	h := p.Middleware(mux)
	for _, path := range []string{"/things", "/nope-1234", "/.env"} {
		var codes []int
		for range 4 {
			r := httptest.NewRequest("GET", path, nil)
			r.RemoteAddr = "192.0.2." + fmt.Sprint(len(path)) + ":1"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			codes = append(codes, w.Code)
		}
		ok := http.StatusOK
		if path != "/things" {
			ok = http.StatusNotFound
		}
		if fmt.Sprint(codes) != fmt.Sprint([]int{ok, ok, 429, 429}) {
			t.Errorf("GET %s × 4 = %v, want %v", path, codes, []int{ok, ok, 429, 429})
		}
	}
}

// Two protectors compose: an address limit before authentication and a
// consumer limit after it both enforce.
func TestTwoProtectorsCompose(t *testing.T) {
	byAddr, _ := newTestProtector(t, Config{MaxRequests: 20, Namespace: "addr:"})
	byKey, _ := newTestProtector(t, Config{MaxRequests: 3, Namespace: "key:", KeyFunc: func(r *http.Request) (string, bool) {
		return r.Header.Get("X-Consumer"), true
	}})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Consumer") == "" {
				http.Error(w, "invalid key", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	h := byAddr.Middleware(auth(byKey.Middleware(app)))
	send := func(consumer string, n int) []int {
		var codes []int
		for range n {
			r := request("192.0.2.10:1")
			if consumer != "" {
				r.Header.Set("X-Consumer", consumer)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			codes = append(codes, w.Code)
		}
		return codes
	}
	if got := fmt.Sprint(send("alpha", 5)); got != "[200 200 200 429 429]" {
		t.Fatalf("send(alpha, 5) = %s, want [200 200 200 429 429]", got)
	}
	if got := fmt.Sprint(send("bravo", 2)); got != "[200 200]" {
		t.Fatalf("send(bravo, 2) = %s, want [200 200]", got)
	}
	// 7 requests so far from the address; 13 more guesses reach its limit of 20.
	got := send("", 30)
	if fmt.Sprint(got[:13]) != fmt.Sprint(repeat(401, 13)) || fmt.Sprint(got[13:]) != fmt.Sprint(repeat(429, 17)) {
		t.Fatalf("send(no consumer, 30) = %v, want 13 × 401, then 17 × 429", got)
	}
}

func repeat(v, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// A consumer named like an address is not counted as that address: on
// Redis the two would otherwise share key names.
func TestConsumerNamedLikeAnAddress(t *testing.T) {
	p, _ := newTestProtector(t, Config{})
	for _, id := range []string{"203.0.113.7", "::", "2001:db8::1", "10.0.0.0/8"} {
		d, _ := p.VerifyKey(t.Context(), id)
		if k := d.Key.String(); d.Key.Prefix.IsValid() || k == id || !strings.HasPrefix(k, "~") {
			t.Errorf("VerifyKey(%q).Key = %q, want a hashed consumer key", id, k)
		}
	}
}

// recorder keeps log records with their attributes.
type recorder = logtest.Recorder

// Nothing bans or lifts silently: each is logged with key, reason and length.
func TestBansAndLiftsAreLogged(t *testing.T) {
	rec := &recorder{}
	p, _ := newTestProtector(t, Config{MaxRequests: 1, BanLimit: 2, Logger: slog.New(rec)})
	ctx := t.Context()
	for range 3 {
		p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.1"))
	}
	p.Ban(ctx, "198.51.100.0/24", BanOptions{Permanent: true, Reason: "scanner", By: "ops"})
	p.Lift(ctx, "192.0.2.1", "alice")
	want := []map[string]string{
		{"msg": "protect: ban added", "key": "192.0.2.1", "reason": "stream passed the ban limit of 2 requests", "length": "1h0m0s", "source": "auto"},
		{"msg": "protect: ban added", "key": "198.51.100.0/24", "reason": "scanner", "length": "permanent", "source": "manual", "by": "ops"},
		{"msg": "protect: ban lifted", "key": "192.0.2.1", "reason": "stream passed the ban limit of 2 requests", "length": "1h0m0s", "by": "alice"},
	}
	if len(rec.Records()) != len(want) {
		t.Fatalf("logged records = %v, want %d", rec.Records(), len(want))
	}
	for i, w := range want {
		for k, v := range w {
			if rec.Records()[i][k] != v {
				t.Errorf("logged record %d: %s = %q, want %q (%v)", i, k, rec.Records()[i][k], v, rec.Records()[i])
			}
		}
	}
}

// downStore is a remote memory store whose Take and TakePlan fail while
// down is set.
type downStore struct {
	remoteStore
	down *atomic.Bool
}

type downSpace struct {
	store.Space
	down *atomic.Bool
}

func (s downStore) Space(sc store.Scope) (store.Space, error) {
	sp, err := s.remoteStore.Space(sc)
	if err != nil {
		return nil, err
	}
	return downSpace{sp, s.down}, nil
}

func (sp downSpace) Take(ctx context.Context, k Key, a netip.Addr, n int64) (store.Result, error) {
	if sp.down.Load() {
		return store.Result{}, errDown
	}
	return sp.Space.Take(ctx, k, a, n)
}

func (sp downSpace) TakePlan(ctx context.Context, k Key, a netip.Addr, plan *Plan, cost int64, stream bool) (store.PlanResult, error) {
	if sp.down.Load() {
		return store.PlanResult{}, errDown
	}
	return sp.Space.TakePlan(ctx, k, a, plan, cost, stream)
}

// Every entry point writes the Decision's Addr and Key, on every path of
// decide: the store answering, each failure policy, the FailLocal store,
// a ban held here, the circuit open, a context that ended, Config.Plan.
// With PROTECT_DECISIONS set, the decisions are also written to that
// file, to compare one tree's with another's.
func TestDecisionAddrKeyOnEveryPath(t *testing.T) {
	var log strings.Builder
	plan := mustPlan(t, "p", Rate{Limit: 2, Period: time.Hour})
	v4, v6 := netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("2001:db8::1")
	for _, store := range []string{"up", "down", "ended"} {
		for _, policy := range []FailurePolicy{FailLocal, FailOpen, FailClosed} {
			for _, mode := range []string{"stream", "plan", "keyfunc"} {
				down := new(atomic.Bool)
				clk := newFakeClock()
				s := downStore{remoteStore{NewMemoryStore(MemoryOptions{Clock: clk.Now})}, down}
				cfg := Config{Store: s, Clock: clk.Now, MaxRequests: 2, BanLimit: 3, OnStoreError: policy, Logger: discardLogger()}
				switch mode {
				case "plan":
					cfg.Plan = plan
				case "keyfunc":
					cfg.KeyFunc = func(r *http.Request) (string, bool) { return r.Header.Get("X-Consumer"), true }
				}
				p, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				down.Store(store != "up")
				ctx := t.Context()
				if store == "ended" {
					c, cancel := context.WithCancel(ctx)
					cancel()
					ctx = c
				}
				type call struct {
					name string
					f    func() (Decision, error)
					addr netip.Addr
					key  Key
				}
				get := func(peer, consumer string) *http.Request {
					r := request(peer)
					if consumer != "" {
						r.Header.Set("X-Consumer", consumer)
					}
					return r
				}
				calls := []call{
					{"Verify(192.0.2.7)", func() (Decision, error) { return p.Verify(ctx, get("192.0.2.7:1", "")) }, v4, p.agg.Key(v4)},
					{"Check(192.0.2.7)", func() (Decision, error) { return p.Check(ctx, get("192.0.2.7:1", "")) }, v4, p.agg.Key(v4)},
					{"Verify([2001:db8::1])", func() (Decision, error) { return p.Verify(ctx, get("[2001:db8::1]:1", "")) }, v6, p.agg.Key(v6)},
					{"VerifyAddr(::ffff:192.0.2.7)", func() (Decision, error) { return p.VerifyAddr(ctx, netip.MustParseAddr("::ffff:192.0.2.7")) }, v4, p.agg.Key(v4)},
					{"VerifyAddr(2001:db8::1%eth0)", func() (Decision, error) { return p.VerifyAddr(ctx, netip.MustParseAddr("2001:db8::1%eth0")) }, v6, p.agg.Key(v6)},
					{"VerifyKey(cus_alpha)", func() (Decision, error) { return p.VerifyKey(ctx, "cus_alpha") }, netip.Addr{}, ConsumerKey("cus_alpha")},
				}
				if mode == "keyfunc" {
					// From an address that is never counted, so never banned:
					// a ban on the address would decide under its key.
					other := netip.MustParseAddr("198.51.100.9")
					calls = append(calls, call{"Verify(198.51.100.9, X-Consumer sk_live_0123456789abcdefghij)", func() (Decision, error) {
						return p.Verify(ctx, get("198.51.100.9:1", "sk_live_0123456789abcdefghij"))
					}, other, ConsumerKey("sk_live_0123456789abcdefghij")})
				}
				for i := range 6 { // past MaxRequests and BanLimit; down, past the breaker's threshold
					for _, c := range calls {
						d, err := c.f()
						name := fmt.Sprintf("%s/%v/%s: %s #%d", store, policy, mode, c.name, i+1)
						if d.Addr != c.addr || d.Key != c.key {
							t.Errorf("%s = %v, addr %v, key %v; want addr %v, key %v", name, d.Status, d.Addr, d.Key, c.addr, c.key)
						}
						fmt.Fprintf(&log, "%s = %v addr %v key %v count %d remaining %d limit %d retry %v policy %q dry %v err %v ban %v; %v\n",
							name, d.Status, d.Addr, d.Key, d.Count, d.Remaining, d.Limit, d.RetryAfter, d.Policy, d.DryRun, d.Err, d.Ban != nil, err)
					}
				}
				p.Close()
				s.Close()
			}
		}
	}
	if f := os.Getenv("PROTECT_DECISIONS"); f != "" {
		if err := os.WriteFile(f, []byte(log.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Verify and Check take the one list's early test as VerifyAddr does:
// on every side of it (a /24 the list meets or not, the edges of IPv4,
// a mapped address, IPv6, a safe network inside a listed range, an
// unknown client, a nil set, a set swapped in, several lists) they
// decide as VerifyAddr does.
func TestVerifyEarlyBlockListTest(t *testing.T) {
	entries := make([]BlockEntry, 0, bigSet+8)
	for i := range bigSet {
		entries = append(entries, BlockEntry{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 15), byte(i >> 7), byte(i << 1)}), 32)})
	}
	for _, s := range []string{"0.0.0.0/32", "255.255.255.255/32", "203.0.113.0/24", "2001:db8::/32"} {
		entries = append(entries, BlockEntry{Prefix: netip.MustParsePrefix(s)})
	}
	big := NewBlockSet(entries)
	small := NewBlockSet([]BlockEntry{{Prefix: netip.MustParsePrefix("198.51.100.0/24")}})
	type probe struct {
		peer string // a RemoteAddr
		xff  string // an X-Forwarded-For, when the peer is a trusted proxy
		want Status
	}
	probes := []probe{
		{"100.0.1.6:1", "", Blocked},
		{"100.0.1.7:1", "", Allowed}, // unlisted, in a /24 the list meets
		{"[::ffff:100.0.1.6]:1", "", Blocked},
		{"255.255.255.255:1", "", Blocked},
		{"255.255.255.254:1", "", Allowed},
		{"0.0.0.0:1", "", Unknown},
		{"203.0.113.5:1", "", Blocked},
		{"203.0.113.200:1", "", Safe}, // a safe network inside a listed range
		{"[2001:db8::5]:1", "", Blocked},
		{"[2001:db9::5]:1", "", Allowed},
		{"[fe80::1%eth0]:1", "", Allowed},
		{"192.0.2.1:1", "", Allowed},   // a /24 the list does not meet
		{"192.0.2.200:1", "", Allowed}, // the same, safe when 192.0.2.192/26 is
		{"garbage", "", Unknown},
		{"10.0.0.1:1", "192.0.2.9, nonsense", Unknown},
	}
	for _, tc := range []struct {
		name string
		safe []string
		set  *BlockSet // the handed-over set; nil for none yet
		more bool      // a second list, which leaves no early test
		over map[string]Status
	}{
		{name: "one list", set: big, over: map[string]Status{"203.0.113.200:1": Blocked}},
		{name: "one list, safe networks", set: big, safe: []string{"203.0.113.128/25", "192.0.2.192/26"}, over: map[string]Status{"192.0.2.200:1": Safe}},
		{name: "a nil set", over: map[string]Status{"100.0.1.6:1": Allowed, "[::ffff:100.0.1.6]:1": Allowed, "255.255.255.255:1": Allowed, "203.0.113.5:1": Allowed, "203.0.113.200:1": Allowed, "[2001:db8::5]:1": Allowed}},
		{name: "two lists", set: big, more: true, over: map[string]Status{"203.0.113.200:1": Blocked}},
	} {
		src := &handingSource{}
		src.set.Store(tc.set)
		lists := []BlockList{{Name: "big", Source: src}}
		if tc.more {
			lists = append(lists, BlockList{Name: "small", Source: staticSource{small}})
		}
		p, err := New(Config{Logger: discardLogger(), MaxRequests: 100, TrustedProxies: []string{"10.0.0.0/8"}, SafeNetworks: tc.safe, BlockLists: lists})
		if err != nil {
			t.Fatal(err)
		}
		for _, pr := range probes {
			want := pr.want
			if w, ok := tc.over[pr.peer]; ok {
				want = w
			}
			for _, f := range []struct {
				name string
				f    func(*http.Request) (Decision, error)
			}{{"Verify", func(r *http.Request) (Decision, error) { return p.Verify(t.Context(), r) }}, {"Check", func(r *http.Request) (Decision, error) { return p.Check(t.Context(), r) }}} {
				r := request(pr.peer)
				if pr.xff != "" {
					r.Header.Set("X-Forwarded-For", pr.xff)
				}
				d, err := f.f(r)
				if err != nil || d.Status != want {
					t.Errorf("%s: %s(%s, X-Forwarded-For %q) = %v, %v; want %v", tc.name, f.name, pr.peer, pr.xff, d.Status, err, want)
				}
				if ap, err := netip.ParseAddrPort(pr.peer); err == nil && !strings.HasPrefix(pr.peer, "10.") {
					if v, _ := p.VerifyAddr(t.Context(), ap.Addr()); v.Status != d.Status || v.Addr != d.Addr || v.Key != d.Key {
						t.Errorf("%s: VerifyAddr(%s) = %v addr %v key %v, want %v addr %v key %v as %s", tc.name, ap.Addr(), v.Status, v.Addr, v.Key, d.Status, d.Addr, d.Key, f.name)
					}
				}
			}
		}
		if tc.more {
			if d, _ := p.Verify(t.Context(), request("198.51.100.1:1")); d.Status != Blocked {
				t.Errorf("%s: Verify(198.51.100.1) = %v, want blocked by the second list", tc.name, d.Status)
			}
		}
		p.Close()
	}

	// A set the source stores is in force from the next request, while
	// requests run.
	src := &handingSource{}
	src.set.Store(big)
	p, err := New(Config{Logger: discardLogger(), MaxRequests: 1 << 40, BlockLists: []BlockList{{Name: "big", Source: src}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				p.Verify(context.Background(), request("192.0.2.1:1"))
			}
		}
	}()
	for i := range 50 {
		with := i%2 == 0
		if with {
			src.set.Store(NewBlockSet([]BlockEntry{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}}))
		} else {
			src.set.Store(big)
		}
		want := map[bool]Status{true: Blocked, false: Allowed}[with]
		if d, _ := p.Verify(t.Context(), request("192.0.2.1:1")); d.Status != want {
			t.Fatalf("Verify(192.0.2.1) after set #%d = %v, want %v", i+1, d.Status, want)
		}
	}
	close(stop)
	<-done
}

// The hot path allocates nothing: every address, hot or new, through a
// Protector on the memory store.
func TestVerifyAddrDoesNotAllocate(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.7")
	p, _ := newTestProtector(t, Config{MaxRequests: 1 << 40, BanLimit: -1})
	bg := context.Background()
	if n := testing.AllocsPerRun(1000, func() { p.VerifyAddr(bg, a) }); n != 0 {
		t.Fatalf("VerifyAddr on a hot address allocates %v times, want 0", n)
	}
	i := 0
	fresh4 := func() {
		i++
		p.VerifyAddr(bg, netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}))
	}
	if n := testing.AllocsPerRun(1000, fresh4); n != 0 {
		t.Fatalf("VerifyAddr on a new IPv4 address each time allocates %v times, want 0", n)
	}
	j := 0
	fresh6 := func() { // a new /64 each time
		j++
		p.VerifyAddr(bg, netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, byte(j >> 8), byte(j), 15: 1}))
	}
	if n := testing.AllocsPerRun(1000, fresh6); n != 0 {
		t.Fatalf("VerifyAddr on a new IPv6 /64 each time allocates %v times, want 0", n)
	}
	// AllocsPerRun calls once more than it measures.
	if got, want := p.store.(*MemoryStore).Len(), 1+1001+1001; got != want {
		t.Fatalf("protector's store Len() = %d, want %d: every new address counted", got, want)
	}
}

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
				if bans, err := p.bans(t.Context(), BanFilter{}); err != nil || len(bans) != 0 {
					t.Fatalf("Bans() = %v, %v; want none", bans, err)
				}
			}
			if n := logs.Count("protect: dry run: would ban"); n != 1 {
				t.Fatalf("logs.Count(%q) = %d, want 1", "protect: dry run: would ban", n)
			}
		})
	}
}

// A protector keeps the lists it was made with: the caller's changes to
// its own slices, or to those Config returns, change nothing it decides
// or reports.
func TestConfigListsAreCopies(t *testing.T) {
	trusted := []string{"10.0.0.1"}
	safe := []string{"192.0.2.0/24"}
	p, _ := newTestProtector(t, Config{TrustedProxies: trusted, SafeNetworks: safe})
	trusted[0], safe[0] = "not an address", "198.51.100.0/24"
	c := p.Config()
	c.TrustedProxies[0], c.SafeNetworks[0] = "also not one", "203.0.113.0/24"
	if got := p.Config(); got.TrustedProxies[0] != "10.0.0.1" || got.SafeNetworks[0] != "192.0.2.0/24" {
		t.Errorf("Config() after its caller changed the lists = %q, %q; want %q, %q", got.TrustedProxies, got.SafeNetworks, "10.0.0.1", "192.0.2.0/24")
	}
	if !p.IsSafe(netip.MustParseAddr("192.0.2.7")) || p.IsSafe(netip.MustParseAddr("203.0.113.7")) {
		t.Error("IsSafe after the caller changed the lists: want 192.0.2.7 safe and 203.0.113.7 not")
	}
}
