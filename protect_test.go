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
	"time"

	"github.com/httpprotect/protect/internal/logtest"
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
			bans, err := p.Bans(t.Context(), BanFilter{})
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
		bans, _ := p.Bans(t.Context(), BanFilter{})
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
	bans, _ := p.Bans(ctx, BanFilter{})
	if len(bans) != 2 || bans[0].Key.String() != "198.51.100.0/24" || !bans[0].Range || bans[0].By != "ops" || bans[0].Reason != "scanner" ||
		bans[1].Key.String() != "2001:db8:1:2::/64" || !bans[1].Permanent() {
		t.Fatalf("Bans() = %+v, want 198.51.100.0/24 by ops for scanner, and 2001:db8:1:2::/64 permanent", bans)
	}
	// Permanent bans outlive any clock; range bans expire.
	clk.Advance(365 * 24 * time.Hour)
	bans, _ = p.Bans(ctx, BanFilter{})
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
