package protect_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/redisstore"
	"github.com/redis/go-redis/v9"
)

// An operator's ban on a client's address, or on exactly its /64, holds
// for every request from it whatever is counted: with KeyFunc and with
// ConsumerFunc, on memory and on Redis, and explain agrees.
func TestAddressBanHoldsWhateverIsCounted(t *testing.T) {
	plan, err := protect.NewPlan("pro", protect.Rate{Limit: 100, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stores := map[string]func(t *testing.T) protect.Store{
		"memory": func(t *testing.T) protect.Store { return protect.NewMemoryStore(protect.MemoryOptions{}) },
		"miniredis": func(t *testing.T) protect.Store {
			c := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
			t.Cleanup(func() { c.Close() })
			return redisstore.New(c, redisstore.Options{RangeRefresh: -1, Logger: slog.New(slog.DiscardHandler)})
		},
	}
	counting := map[string]func(*protect.Config){
		"KeyFunc": func(c *protect.Config) {
			c.KeyFunc = func(*http.Request) (string, bool) { return "acme", true }
		},
		"ConsumerFunc": func(c *protect.Config) {
			c.ConsumerFunc = func(*http.Request) (string, *protect.Plan, bool) { return "acme", plan, true }
		},
	}
	targets := []struct{ ban, peer string }{
		{"203.0.113.7", "203.0.113.7:4000"},
		{"2001:db8:1:2::/64", "[2001:db8:1:2::99]:4000"}, // exactly the counting key of the /64
	}
	for sname, mk := range stores {
		for cname, set := range counting {
			for _, tt := range targets {
				t.Run(sname+"/"+cname+"/"+tt.ban, func(t *testing.T) {
					s := mk(t)
					t.Cleanup(func() { s.Close() })
					cfg := protect.Config{Store: s, Logger: slog.New(slog.DiscardHandler)}
					set(&cfg)
					p, err := protect.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { p.Close() })
					r := httptest.NewRequest("GET", "/", nil)
					r.RemoteAddr = tt.peer
					if d, _ := p.Verify(t.Context(), r); d.Status != protect.Allowed {
						t.Fatalf("Verify(%s) before the ban = %v, want allowed", tt.peer, d.Status)
					}
					if _, err := p.Ban(t.Context(), tt.ban, protect.BanOptions{For: time.Hour}); err != nil {
						t.Fatal(err)
					}
					for i := range 3 {
						d, _ := p.Verify(t.Context(), r)
						if d.Status != protect.Banned || !d.Refused() || d.StatusCode() != http.StatusForbidden {
							t.Fatalf("Verify(%s) request %d after Ban(%s) = %v %d, want banned 403", tt.peer, i, tt.ban, d.Status, d.StatusCode())
						}
					}
					ex, err := admin.New(p).Explain(t.Context(), tt.peer, nil)
					if err != nil || ex.Step != admin.StepBanned || ex.Status != http.StatusForbidden || ex.Ban == nil || ex.Ban.Key != tt.ban {
						t.Fatalf("Explain(%s) = %+v, %v; want banned by %s", tt.peer, ex, err, tt.ban)
					}
				})
			}
		}
	}
}

// With Redis down, a request that counts a consumer meets the failure
// policy once: the address's ban check before it reads "not banned" and
// leaves the policy to the consumer's own decision, rather than applying
// it a second time (one request, one failure, two calls to the store).
func TestAddressBanCheckAppliesNoPolicy(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	s := redisstore.New(c, redisstore.Options{RangeRefresh: -1, Logger: slog.New(slog.DiscardHandler)})
	p, err := protect.New(protect.Config{
		Store: s, OnStoreError: protect.FailOpen, Logger: slog.New(slog.DiscardHandler),
		KeyFunc: func(*http.Request) (string, bool) { return "acme", true },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); s.Close() })
	m.Close()
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "203.0.113.7:4000"
	d, _ := p.Verify(t.Context(), r)
	st := p.Stats()
	if d.Status != protect.Allowed || st.StoreFailures != 1 || st.StoreCalls != 2 {
		t.Fatalf("Verify(203.0.113.7) = %v with Stats().StoreFailures = %d, StoreCalls = %d; want allowed, 1, 2", d.Status, st.StoreFailures, st.StoreCalls)
	}
}
