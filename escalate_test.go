package protect

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// banKey makes addr's key banned: with BanLimit 1, its second request is.
func banKey(t *testing.T, p *Protector, addr string) {
	t.Helper()
	a := netip.MustParseAddr(addr)
	p.VerifyAddr(t.Context(), a)
	if d, _ := p.VerifyAddr(t.Context(), a); d.Status != Banned {
		t.Fatalf("VerifyAddr(%s) = %v, want Banned", addr, d.Status)
	}
}

// rangeBansOf returns the range bans p lists, by key.
func rangeBansOf(t *testing.T, p *Protector) map[string]Ban {
	t.Helper()
	bans, err := p.bans(t.Context(), BanFilter{RangesOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]Ban{}
	for _, b := range bans {
		m[b.Key.String()] = b
	}
	return m
}

func status(t *testing.T, p *Protector, addr string) Status {
	t.Helper()
	d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr(addr))
	return d.Status
}

// escalationCase runs the escalation scenario on p (MaxRequests 1,
// BanLimit 1, the other settings at their defaults): 3 /64s → their /56,
// counted once per ban; a lift; 3 /56s → their /48.
func escalationCase(t *testing.T, p *Protector) {
	t.Helper()
	// Two /64s of one /56 banned, and each flooding on while banned:
	// refused requests count nothing towards the /56.
	banKey(t, p, "2001:db8:1:1::1")
	banKey(t, p, "2001:db8:1:2::1")
	for range 50 {
		status(t, p, "2001:db8:1:1::1")
		status(t, p, "2001:db8:1:2::2")
	}
	if r := rangeBansOf(t, p); len(r) != 0 {
		t.Fatalf("rangeBansOf() after 2 bans and 100 refused requests = %v, want none", r)
	}
	if got := status(t, p, "2001:db8:1:3::1"); got != Allowed {
		t.Fatalf("VerifyAddr(2001:db8:1:3::1), a third /64 before its ban = %v, want Allowed", got)
	}
	banKey(t, p, "2001:db8:1:3::1")
	r := rangeBansOf(t, p)
	b, ok := r["2001:db8:1::/56"]
	if len(r) != 1 || !ok {
		t.Fatalf("rangeBansOf() after 3 /64 bans = %v, want 2001:db8:1::/56", r)
	}
	if b.Source != SourceAuto || b.Reason != "3 /64 bans inside 2001:db8:1::/56" || b.Expires.Sub(b.Created) != time.Hour {
		t.Fatalf("rangeBansOf()[2001:db8:1::/56] = %+v, want auto, its reason, 1h", b)
	}
	if got := status(t, p, "2001:db8:1:ff::9"); got != Banned {
		t.Fatalf("VerifyAddr(2001:db8:1:ff::9), a fresh /64 inside the /56 = %v, want Banned", got)
	}
	if n := p.Stats().AutoBans; n != 4 {
		t.Fatalf("Stats().AutoBans = %d, want 4: three /64s and the /56", n)
	}
	if got := status(t, p, "2001:db8:2::1"); got != Allowed {
		t.Fatalf("VerifyAddr(2001:db8:2::1), outside the /56 = %v, want Allowed", got)
	}

	// A lift of the /56 serves it again, and lets it escalate again.
	ctx := t.Context()
	if _, err := p.Lift(ctx, "2001:db8:1::/56", "test"); err != nil {
		t.Fatal(err)
	}
	if got := status(t, p, "2001:db8:1:ff::9"); got != Allowed {
		t.Fatalf("VerifyAddr(2001:db8:1:ff::9) inside the lifted /56 = %v, want Allowed", got)
	}
	for _, a := range []string{"2001:db8:1:11::1", "2001:db8:1:12::1", "2001:db8:1:13::1"} {
		banKey(t, p, a)
	}
	b, ok = rangeBansOf(t, p)["2001:db8:1::/56"]
	if !ok || b.Expires.Sub(b.Created) != 2*time.Hour || !strings.HasSuffix(b.Reason, ", offense 2") {
		t.Fatalf("rangeBansOf()[2001:db8:1::/56] banned again = %+v, %v; want its second ban, 2h", b, ok)
	}

	// Three /56s escalated inside one /48 ban the /48.
	for _, n := range []string{"2", "3"} {
		for _, s := range []string{"1", "2", "3"} {
			banKey(t, p, "2001:db8:1:"+n+"0"+s+"::1")
		}
	}
	r = rangeBansOf(t, p)
	b, ok = r["2001:db8:1::/48"]
	if !ok || b.Reason != "3 /56 bans inside 2001:db8:1::/48" {
		t.Fatalf("rangeBansOf() after 3 /56 bans = %v, want 2001:db8:1::/48", r)
	}
	if got := status(t, p, "2001:db8:1:ff00::1"); got != Banned {
		t.Fatalf("VerifyAddr(2001:db8:1:ff00::1) inside the /48 = %v, want Banned", got)
	}
}

func TestEscalationMemory(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 1, BanLimit: 1})
	escalationCase(t, p)
}

// A key banned again counts once: its repeat bans lengthen its own and do
// not ban its neighbours. Bans further apart than OffenseWindow do not
// add up.
func TestEscalationCountsKeysOnce(t *testing.T) {
	p, clk := newTestProtector(t, Config{MaxRequests: 1, BanLimit: 1, BanDuration: time.Minute, OffenseWindow: time.Hour})
	for range 3 {
		banKey(t, p, "2001:db8:1:1::1")
		clk.Advance(10 * time.Minute) // the ban ends; the offense counts on
	}
	banKey(t, p, "2001:db8:1:2::1")
	if r := rangeBansOf(t, p); len(r) != 0 {
		t.Fatalf("rangeBansOf() after one /64 banned 3 times and another once = %v, want none", r)
	}
	clk.Advance(2 * time.Hour) // past the offense window: the count is forgotten
	banKey(t, p, "2001:db8:1:3::1")
	banKey(t, p, "2001:db8:1:4::1")
	if r := rangeBansOf(t, p); len(r) != 0 {
		t.Fatalf("rangeBansOf() after 2 bans, then 2 more after the window = %v, want none", r)
	}
	banKey(t, p, "2001:db8:1:5::1")
	if _, ok := rangeBansOf(t, p)["2001:db8:1::/56"]; !ok {
		t.Fatal("rangeBansOf() after 3 bans within the window holds no 2001:db8:1::/56, want it")
	}
}

func TestEscalationSettings(t *testing.T) {
	v4 := []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}
	tests := []struct {
		name string
		cfg  Config
		bans []string
		want string // the range banned, or ""
	}{
		{"IPv4 is off by default", Config{}, v4, ""},
		{"IPv4 on", Config{IPv4Escalation: []int{24}}, v4, "192.0.2.0/24"},
		{"off", Config{EscalationThreshold: -1}, []string{"2001:db8:1:1::1", "2001:db8:1:2::1", "2001:db8:1:3::1"}, ""},
		{"IPv6 off", Config{IPv6Escalation: []int{}}, []string{"2001:db8:1:1::1", "2001:db8:1:2::1", "2001:db8:1:3::1"}, ""},
		{"threshold 2", Config{EscalationThreshold: 2}, []string{"2001:db8:1:1::1", "2001:db8:1:2::1"}, "2001:db8:1::/56"},
		{"counted by /56", Config{IPv6Prefix: 56}, []string{"2001:db8:1:100::1", "2001:db8:1:200::1", "2001:db8:1:300::1"}, "2001:db8:1::/48"},
		{"dry run writes no range", Config{DryRun: true}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.MaxRequests, tt.cfg.BanLimit = 1, 1
			p, _ := newTestProtector(t, tt.cfg)
			for _, a := range tt.bans {
				banKey(t, p, a)
			}
			if tt.cfg.DryRun {
				for _, a := range []string{"2001:db8:1:1::1", "2001:db8:1:2::1", "2001:db8:1:3::1"} {
					for range 3 {
						status(t, p, a)
					}
				}
			}
			r := rangeBansOf(t, p)
			if _, ok := r[tt.want]; tt.want != "" && (!ok || len(r) != 1) || tt.want == "" && len(r) != 0 {
				t.Fatalf("rangeBansOf() = %v, want %q", r, tt.want)
			}
		})
	}
}

func TestEscalationConfigErrors(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{IPv6Escalation: []int{64}}, "IPv6Escalation [64]"},
		{Config{IPv6Escalation: []int{48, 56}}, "IPv6Escalation [48 56]"},
		{Config{IPv6Escalation: []int{56, 24}}, "/24 is shorter than /32"},
		{Config{IPv4Escalation: []int{32}}, "IPv4Escalation [32]"},
		{Config{IPv4Escalation: []int{8}}, "/8 is shorter than /16"},
		{Config{IPv4Prefix: 24, IPv4Escalation: []int{24}}, "IPv4Escalation [24]"},
	}
	for _, tt := range tests {
		_, err := New(tt.cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v; want ErrConfig quoting %q", tt.cfg, err, tt.want)
		}
	}
	// Default escalation prefixes no wider than the counting prefix are dropped, not an error.
	p, _ := newTestProtector(t, Config{IPv6Prefix: 48})
	if c := p.Config(); len(c.IPv6Escalation) != 0 || c.EscalationThreshold != 3 {
		t.Fatalf("New(IPv6Prefix 48).Config() = IPv6Escalation %v, EscalationThreshold %d; want none, 3", c.IPv6Escalation, c.EscalationThreshold)
	}
}

// Escalation never runs on a request that wrote no ban: a banned flood
// and a fresh client cost what they did.
func TestEscalationOffTheHotPath(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 1 << 40})
	a := netip.MustParseAddr("2001:db8::1")
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { p.VerifyAddr(ctx, a) }); n != 0 {
		t.Fatalf("VerifyAddr(%s) allocates %v times, want 0", a, n)
	}
}

// Escalation lives with the ban list, not with one protector's counters:
// a range that a protector with a Namespace of its own escalated, lifted
// by another on the same ban list (protectctl, whose Namespace is the ban
// namespace), escalates again, and its offenses are those of the list.
func TestEscalationSharedBanNamespace(t *testing.T) {
	clk := newFakeClock()
	store := NewMemoryStore(MemoryOptions{Clock: clk.Now})
	api, _ := newTestProtector(t, Config{Store: store, Clock: clk.Now, Namespace: "api:", MaxRequests: 1, BanLimit: 1})
	admin, _ := newTestProtector(t, Config{Store: store, Clock: clk.Now})
	for _, a := range []string{"2001:db8:1:1::1", "2001:db8:1:2::1", "2001:db8:1:3::1"} {
		banKey(t, api, a)
	}
	if _, ok := rangeBansOf(t, admin)["2001:db8:1::/56"]; !ok {
		t.Fatal("rangeBansOf(admin) after 3 /64 bans holds no 2001:db8:1::/56, want it on the shared list")
	}
	if _, err := admin.Lift(t.Context(), "2001:db8:1::/56", "test"); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"2001:db8:1:11::1", "2001:db8:1:12::1", "2001:db8:1:13::1"} {
		banKey(t, api, a)
	}
	b, ok := rangeBansOf(t, admin)["2001:db8:1::/56"]
	if !ok || !strings.HasSuffix(b.Reason, ", offense 2") {
		t.Fatalf("rangeBansOf(admin)[2001:db8:1::/56] after 3 more /64 bans = %+v, %v; want the /56's second ban", b, ok)
	}
}

// The memory store follows the same rule: an escalated range walks no
// table, so a counter inside it is kept.
func TestEscalationKeepsCountersMemory(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 1, BanLimit: 1})
	banKey(t, p, "2001:db8:1:1::1")
	banKey(t, p, "2001:db8:1:2::1")
	status(t, p, "2001:db8:1:4::1")
	banKey(t, p, "2001:db8:1:3::1")
	if _, err := p.Lift(t.Context(), "2001:db8:1::/56", "test"); err != nil {
		t.Fatal(err)
	}
	if got := status(t, p, "2001:db8:1:4::1"); got != Banned {
		t.Fatalf("VerifyAddr(2001:db8:1:4::1) inside the lifted escalated /56 = %v, want Banned (counter kept, not walked)", got)
	}
}
