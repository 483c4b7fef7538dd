package protect

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// Every call that decides a request counts it once, by status, and only
// those: Penalize counts a failure, the address check before a consumer's
// plan counts nothing.
func TestStatsDecisions(t *testing.T) {
	plan, err := NewPlan("one", Rate{Limit: 1, Period: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := newTestProtector(t, Config{MaxRequests: 1, BanLimit: -1, SafeNetworks: []string{"10.0.0.0/8"},
		ConsumerFunc: func(r *http.Request) (string, *Plan, bool) {
			c := r.Header.Get("X-Consumer")
			return c, plan, c != ""
		}})
	ctx := context.Background()
	req := func(remote, consumer string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		if consumer != "" {
			r.Header.Set("X-Consumer", consumer)
		}
		return r
	}
	steps := []struct {
		name string
		call func() (Decision, error)
		want Status
	}{
		{"Verify", func() (Decision, error) { return p.Verify(ctx, req("192.0.2.1:1", "")) }, Allowed},
		{"Check", func() (Decision, error) { return p.Check(ctx, req("192.0.2.1:1", "")) }, Limited},
		{"VerifyAddr", func() (Decision, error) { return p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.1")) }, Limited},
		{"VerifyAddr safe", func() (Decision, error) { return p.VerifyAddr(ctx, netip.MustParseAddr("10.0.0.1")) }, Safe},
		{"VerifyAddr unknown", func() (Decision, error) { return p.VerifyAddr(ctx, netip.Addr{}) }, Unknown},
		{"VerifyKey", func() (Decision, error) { return p.VerifyKey(ctx, "k") }, Allowed},
		{"VerifyKey empty", func() (Decision, error) { return p.VerifyKey(ctx, "") }, Unknown},
		{"Verify consumer", func() (Decision, error) { return p.Verify(ctx, req("192.0.2.2:1", "acme")) }, Allowed},
		{"VerifyConsumer", func() (Decision, error) { return p.VerifyConsumer(ctx, "acme", plan) }, Limited},
		{"VerifyConsumerN", func() (Decision, error) { return p.VerifyConsumerN(ctx, "bob", plan, 1) }, Allowed},
		{"VerifyConsumer no plan", func() (Decision, error) { return p.VerifyConsumer(ctx, "bob", nil) }, Unknown},
		{"VerifyConsumer empty", func() (Decision, error) { return p.VerifyConsumer(ctx, "", plan) }, Unknown},
		{"VerifyConsumerN negative", func() (Decision, error) { return p.VerifyConsumerN(ctx, "bob", plan, -1) }, Unavailable},
	}
	var want [numStatuses]uint64
	for _, s := range steps {
		d, _ := s.call()
		if d.Status != s.want {
			t.Fatalf("%s = %v, want %v", s.name, d.Status, s.want)
		}
		want[s.want]++
	}
	if _, err := p.Penalize(ctx, req("192.0.2.3:1", ""), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Penalize(ctx, req("192.0.2.3:1", ""), 0); err == nil {
		t.Fatal("Penalize(0) = nil error, want ErrBadPenalty")
	}
	s := p.Stats()
	if s.Decisions != want || s.Penalties != 3 || s.DryRunRefusals != 0 {
		t.Fatalf("Stats() = Decisions %v, Penalties %d, DryRunRefusals %d; want %v, 3, 0", s.Decisions, s.Penalties, s.DryRunRefusals, want)
	}
	if s.StoreCalls != 0 || s.StoreLatency.Count() != 0 || s.RangeBans != 0 || s.Namespace != "protect:" || s.OnStoreError != FailLocal {
		t.Fatalf("Stats() on the memory store = %+v, want no store calls nor range bans, namespace protect:, FailLocal", s)
	}
}

// Middleware under CountStatus decides each request once, whatever it
// then counts: the Check before the handler is the decision, a failure
// after it a penalty, and the refused attempt of a client with no
// failure left both.
func TestStatsFailureMiddleware(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 2, BanLimit: 3, CountStatus: func(s int) bool { return s == 401 }})
	h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	var codes []int
	for range 5 {
		r := httptest.NewRequest("POST", "/login", nil)
		r.RemoteAddr = "192.0.2.9:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		codes = append(codes, w.Code)
	}
	// 401, 401 (2 failures: none left), 429 (counted: 3), 403 (counted:
	// 4 passes BanLimit), 403 (banned).
	if fmt.Sprint(codes) != "[401 401 429 403 403]" {
		t.Fatalf("POST /login × 5 = %v, want [401 401 429 403 403]", codes)
	}
	s := p.Stats()
	var want [numStatuses]uint64
	want[Allowed], want[Limited], want[Banned] = 2, 1, 2
	if s.Decisions != want || s.Penalties != 4 || s.AutoBans != 1 {
		t.Fatalf("Stats() = Decisions %v, Penalties %d, AutoBans %d; want %v, 4, 1", s.Decisions, s.Penalties, s.AutoBans, want)
	}
}

// Counts from many goroutines add up exactly, and the stripes they land
// on are spread: the requests of one key, and the keys of one count, use
// more than one stripe.
func TestStatsStripes(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 1 << 40, BanLimit: -1})
	const goroutines, each = 16, 500
	used := map[*statStripe]bool{}
	for i := range int64(each) {
		used[p.stats.stripe((&Decision{Count: i + 1}).hint())] = true
	}
	if len(p.stats.stripes) > 1 && len(used) < 2 {
		t.Fatalf("stripe(hint()) of counts 1 to %d = one stripe of %d, want at least 2", each, len(p.stats.stripes))
	}
	clear(used)
	for i := range int64(each) { // a consumer's plan: nothing counted, its limit's remaining moves
		used[p.stats.stripe((&Decision{Remaining: 1000 - i}).hint())] = true
	}
	if len(p.stats.stripes) > 1 && len(used) < 2 {
		t.Fatalf("stripe(hint()) of %d plan decisions = one stripe of %d, want at least 2", each, len(p.stats.stripes))
	}
	clear(used)
	for i := range time.Duration(each) {
		used[p.stats.stripe((&Decision{Status: Banned, RetryAfter: time.Hour - i*time.Millisecond}).hint())] = true
	}
	if len(p.stats.stripes) > 1 && len(used) < 2 {
		t.Fatalf("stripe(hint()) of %d bans' time left = one stripe of %d, want at least 2", each, len(p.stats.stripes))
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			a := netip.AddrFrom4([4]byte{192, 0, 2, byte(g)})
			for range each {
				p.VerifyAddr(context.Background(), a)
			}
		})
	}
	wg.Wait()
	if n := p.Stats().Decisions[Allowed]; n != goroutines*each {
		t.Fatalf("Stats().Decisions[Allowed] = %d, want %d", n, goroutines*each)
	}
}

// A manual ban, its lift, and a range ban in force are counted.
func TestStatsBans(t *testing.T) {
	p, _ := newTestProtector(t, Config{})
	ctx := context.Background()
	for _, target := range []string{"192.0.2.1", "198.51.100.0/24", "consumer:acme"} {
		if _, err := p.Ban(ctx, target, BanOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Lift(ctx, "192.0.2.1", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Lift(ctx, "192.0.2.2", "test"); err != nil { // not banned: nothing lifted
		t.Fatal(err)
	}
	if s := p.Stats(); s.ManualBans != 3 || s.BansLifted != 1 || s.RangeBans != 1 || s.AutoBans != 0 {
		t.Fatalf("Stats() = %+v, want ManualBans 3, BansLifted 1, RangeBans 1, AutoBans 0", s)
	}
	if _, err := p.liftAll(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.BansLifted != 3 || s.RangeBans != 0 {
		t.Fatalf("Stats() after LiftAll = %+v, want BansLifted 3, RangeBans 0", s)
	}
}

// BenchmarkStats measures a scrape's read of the counters.
func BenchmarkStats(b *testing.B) {
	p := benchProtector(b)
	b.ReportAllocs()
	for b.Loop() {
		p.Stats()
	}
}

// BenchmarkStatsDecided measures the counting a request adds, from
// GOMAXPROCS goroutines at once: each should stay on a stripe of its own.
func BenchmarkStatsDecided(b *testing.B) {
	p := benchProtector(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		d := Decision{Status: Allowed}
		for pb.Next() {
			p.decided(&d)
		}
	})
}

// A range ban written by prefix escalation is an automatic ban, and the
// escalation's calls of the memory store are no store traffic.
func TestStatsEscalation(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 1, BanLimit: 1})
	for _, a := range []string{"2001:db8:1:1::1", "2001:db8:1:2::1", "2001:db8:1:3::1"} {
		banKey(t, p, a)
	}
	if s := p.Stats(); s.AutoBans != 4 || s.RangeBans != 1 || s.StoreCalls != 0 || s.StoreLatency.Count() != 0 {
		t.Fatalf("Stats() = AutoBans %d, RangeBans %d, StoreCalls %d; want 4 (3 keys and their /56), 1 range, no store calls", s.AutoBans, s.RangeBans, s.StoreCalls)
	}
}
