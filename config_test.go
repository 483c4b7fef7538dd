package protect

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestConfigErrorsAtOnce: New reports every problem of a Config in one
// error, each a *ConfigError naming its field, and Validate finds the
// same without making a protector.
func TestConfigErrorsAtOnce(t *testing.T) {
	cfg := Config{
		TTL:            -time.Second,
		BanFactor:      0.5,
		StoreTimeout:   time.Nanosecond,
		IPv4Prefix:     40,
		TrustedProxies: []string{"10.0.0.1/8"},
		SafeNetworks:   []string{"garbage"},
	}
	want := []string{"BanFactor", "IPv4Prefix", "SafeNetworks", "StoreTimeout", "TTL", "TrustedProxies"}
	for name, err := range map[string]error{"Validate": cfg.Validate(), "New": func() error { _, err := New(cfg); return err }()} {
		if !errors.Is(err, ErrConfig) {
			t.Fatalf("%s(%+v) = %v, want an error wrapping ErrConfig", name, cfg, err)
		}
		var fields []string
		var walk func(error)
		walk = func(err error) {
			if ce, ok := err.(*ConfigError); ok {
				fields = append(fields, ce.Field)
				return
			}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range j.Unwrap() {
					walk(e)
				}
			}
		}
		walk(err)
		slices.Sort(fields)
		if !slices.Equal(fields, want) {
			t.Errorf("%s(%+v) = fields %q (%v), want %q", name, cfg, fields, err, want)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("Config{}.Validate() = %v, want nil", err)
	}
	e := &ConfigError{Field: "BanFactor", Value: "0.5", Reason: "must be a number of at least 1"}
	if got, want := e.Error(), "protect: bad config: BanFactor 0.5: must be a number of at least 1"; got != want {
		t.Fatalf("ConfigError.Error() = %q, want %q", got, want)
	}
}

// The default BanLimit follows MaxRequests (5×), so raising MaxRequests
// never puts the ban before the limit; an explicit BanLimit stays what it
// says, at or below MaxRequests included.
func TestBanLimitDefault(t *testing.T) {
	tests := []struct {
		max, ban, want int64
	}{
		{0, 0, 1000},
		{5000, 0, 25000},
		{1, 0, 5},
		{math.MaxInt64 / 4, 0, math.MaxInt64}, // saturates, never wraps negative
		{5000, 1000, 1000},                    // explicit: a ban without a 429 phase past 1000
		{10, 3, 3},
		{10, -1, -1},
	}
	for _, tt := range tests {
		p, _ := newTestProtector(t, Config{MaxRequests: tt.max, BanLimit: tt.ban})
		if got := p.Config().BanLimit; got != tt.want {
			t.Errorf("New(MaxRequests %d, BanLimit %d).Config().BanLimit = %d, want %d", tt.max, tt.ban, got, tt.want)
		}
	}
}

// What a client that keeps going sees, request by request: with only
// MaxRequests set, a 429 phase and then a ban; with BanLimit at or below
// MaxRequests, a ban with no 429 before it.
func TestBanLimitPhases(t *testing.T) {
	tests := []struct {
		cfg  Config
		n    int
		want string
	}{
		{Config{MaxRequests: 2}, 12, "[allowed allowed limited limited limited limited limited limited limited limited banned banned]"},
		{Config{MaxRequests: 10, BanLimit: 3}, 5, "[allowed allowed allowed banned banned]"},
		{Config{MaxRequests: 3, BanLimit: 3}, 5, "[allowed allowed allowed banned banned]"},
	}
	for _, tt := range tests {
		p, _ := newTestProtector(t, tt.cfg)
		var got []Status
		for range tt.n {
			d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1"))
			got = append(got, d.Status)
		}
		if fmt.Sprint(got) != tt.want {
			t.Errorf("New(%+v): VerifyAddr(192.0.2.1) × %d = %v, want %s", tt.cfg, tt.n, got, tt.want)
		}
	}
}

func TestPolicyName(t *testing.T) {
	for ns, want := range map[string]string{
		"protect:": "protect", "login:": "login", "API:v2:": "api-v2", "123:": "protect", "a{b}:": "a-b-",
	} {
		if got := policyName(ns); got != want {
			t.Errorf("policyName(%q) = %q; want %q", ns, got, want)
		}
	}
	if _, err := New(Config{Name: "Bad Name"}); err == nil || !strings.Contains(err.Error(), `"Bad Name"`) {
		t.Errorf("New(Config{Name: %q}) = %v, want an error that quotes it", "Bad Name", err)
	}
}
