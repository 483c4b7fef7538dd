package redisstore

import (
	"errors"
	"math"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// banStores are the stores the ban operations are checked on: each makes
// a protector and a function that lets d pass as the store sees it.
var banStores = []struct {
	name string
	make func(t *testing.T, cfg protect.Config) (*protect.Protector, func(time.Duration))
}{
	{"memory", func(t *testing.T, cfg protect.Config) (*protect.Protector, func(time.Duration)) {
		p, clk := newTestProtector(t, cfg)
		return p, clk.Advance
	}},
	{"miniredis", func(t *testing.T, cfg protect.Config) (*protect.Protector, func(time.Duration)) {
		m := miniredis.RunT(t)
		in := newInstance(t, m.Addr(), "protect:", cfg, Options{RangeRefresh: -1, BanCacheTTL: -1})
		return in.p, m.FastForward
	}},
	{"redis-server", func(t *testing.T, cfg protect.Config) (*protect.Protector, func(time.Duration)) {
		addr := realRedisAddr(t)
		in := newInstance(t, addr, testNamespace(t, addr), cfg, Options{RangeRefresh: -1, BanCacheTTL: -1})
		return in.p, time.Sleep
	}},
}

// A ban shorter than a millisecond (which Redis cannot keep, and once
// read as "permanent") lasts a millisecond on every store and then ends;
// one of math.MaxInt64 is refused with its length quoted; one of
// MaxDuration holds, with a Retry-After that counts forward.
func TestBanLengthBounds(t *testing.T) {
	for _, st := range banStores {
		t.Run(st.name, func(t *testing.T) {
			p, wait := st.make(t, protect.Config{})
			ctx := t.Context()
			b, err := p.Ban(ctx, "192.0.2.1", protect.BanOptions{For: 500 * time.Microsecond})
			if err != nil || b.Permanent() || b.Expires.Sub(b.Created) != time.Millisecond {
				t.Fatalf("Ban(500µs) = %+v, %v; want a ban of 1ms", b, err)
			}
			wait(5 * time.Millisecond)
			if d, _ := p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.1")); d.Status != protect.Allowed {
				t.Fatalf("a 500µs ban after 5ms: %v", d.Status)
			}
			if _, err := p.Ban(ctx, "192.0.2.2", protect.BanOptions{For: math.MaxInt64}); err == nil ||
				!strings.Contains(err.Error(), time.Duration(math.MaxInt64).String()) {
				t.Fatalf("Ban(MaxInt64) = %v; want an error quoting the length", err)
			}
			if b, err := p.Ban(ctx, "192.0.2.3", protect.BanOptions{For: protect.MaxDuration}); err != nil || b.Expires.Sub(b.Created) != protect.MaxDuration {
				t.Fatalf("Ban(protect.MaxDuration) = %+v, %v", b, err)
			}
			d, _ := p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.3"))
			w := httptest.NewRecorder()
			d.WriteResponse(w)
			ra, err := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
			if d.Status != protect.Banned || err != nil || ra < int64(protect.MaxDuration/time.Second)-60 || ra > int64(protect.MaxDuration/time.Second) {
				t.Fatalf("banned for MaxDuration: %v, Retry-After %q", d.Status, w.Header().Get("Retry-After"))
			}
		})
	}
}

// Durations near math.MaxInt64 are refused by New with the value quoted;
// at MaxDuration, the stream still limits and escalation still escalates.
func TestConfigDurationBounds(t *testing.T) {
	huge := time.Duration(math.MaxInt64)
	for _, cfg := range []protect.Config{{TTL: huge}, {BanDuration: huge}, {MaxBanDuration: huge}, {OffenseWindow: huge}, {StoreTimeout: huge}} {
		if _, err := protect.New(cfg); !errors.Is(err, protect.ErrConfig) || !strings.Contains(err.Error(), huge.String()) {
			t.Errorf("New(%+v) = %v; want protect.ErrConfig quoting %v", cfg, err, huge)
		}
	}
	for _, st := range banStores {
		t.Run(st.name, func(t *testing.T) {
			p, _ := st.make(t, protect.Config{TTL: protect.MaxDuration, MaxRequests: 2, BanLimit: 3, MaxBanDuration: protect.MaxDuration, OffenseWindow: protect.MaxDuration})
			ctx := t.Context()
			a := netip.MustParseAddr("192.0.2.7")
			var got []string
			for range 4 {
				d, _ := p.VerifyAddr(ctx, a)
				got = append(got, d.Status.String())
			}
			if want := []string{"allowed", "allowed", "limited", "banned"}; !slices.Equal(got, want) {
				t.Fatalf("TTL MaxDuration: %v, want %v", got, want)
			}
			// The third ban of the offense window is 4 × BanDuration.
			for offense := 2; offense <= 3; offense++ {
				if _, err := p.Lift(ctx, "192.0.2.7", "test"); err != nil {
					t.Fatal(err)
				}
				for range 4 {
					p.VerifyAddr(ctx, a)
				}
			}
			k := countedKey(a.String())
			st, err := admin.New(p).InspectKey(ctx, k)
			if err != nil || st.Ban == nil || st.Ban.Offense != 3 || st.Ban.Expires.Sub(st.Ban.Created) != 4*protect.DefaultBanDuration {
				t.Fatalf("third ban: %+v, %v", st.Ban, err)
			}
		})
	}
}

// A CIDR lift lifts every ban inside it, key bans and range bans, also
// when the CIDR is exactly one counting key; bans outside it stay.
func TestLiftCIDRLiftsInside(t *testing.T) {
	for _, st := range banStores {
		t.Run(st.name, func(t *testing.T) {
			p, _ := st.make(t, protect.Config{IPv4Prefix: 24})
			ctx := t.Context()
			for _, target := range []string{
				"2001:db8:1:2::/80", "2001:db8:1:2:8000::/65", "2001:db8:1:2::99", // inside 2001:db8:1:2::/64
				"203.0.113.0/25", "203.0.113.7", // inside 203.0.113.0/24
				"2001:db8:1:3::/80", "2001:db8:1::/48", "203.0.0.0/16", "198.51.100.1", // outside
			} {
				if _, err := p.Ban(ctx, target, protect.BanOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for target, n := range map[string]int{"2001:db8:1:2::/64": 3, "203.0.113.0/24": 2} {
				if lifted, err := p.Lift(ctx, target, "test"); err != nil || len(lifted) != n {
					t.Errorf("Lift(%q) = %v, %v; want %d bans", target, lifted, err, n)
				}
			}
			if got, want := bannedKeys(t, p), []string{"198.51.100.0/24", "2001:db8:1:3::/80", "2001:db8:1::/48", "203.0.0.0/16"}; !slices.Equal(got, want) {
				t.Fatalf("left %v, want %v", got, want)
			}
		})
	}
}
