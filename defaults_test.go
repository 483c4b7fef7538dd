package protect

import (
	"fmt"
	"math"
	"net/netip"
	"testing"
)

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
