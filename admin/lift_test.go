package admin_test

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// Admin.Lift refuses a CIDR wider than a /8 of IPv4 or a /16 of IPv6
// (a typo more often than a wish), LiftWide takes it, and LiftAll lifts
// every ban, consumer keys among them, each counted as a lift.
func TestLiftWidths(t *testing.T) {
	p, err := protect.New(protect.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a, ctx := admin.New(p), t.Context()
	for _, target := range []string{"198.51.100.7", "10.0.0.0/8", "2001:db8::/32", "consumer:acme"} {
		if _, err := p.Ban(ctx, target, protect.BanOptions{}); err != nil {
			t.Fatalf("Ban(%q) = %v", target, err)
		}
	}
	for _, target := range []string{"0.0.0.0/0", "::/0", "::ffff:0:0/96", "2000::/3"} {
		if _, err := a.Lift(ctx, []string{target}, "test"); !errors.Is(err, protect.ErrWideTarget) {
			t.Errorf("Lift(%q) = %v; want ErrWideTarget", target, err)
		}
	}
	if bans, _ := a.Bans(ctx, admin.Filter{}); len(bans) != 4 {
		t.Fatalf("Bans() after refused lifts = %d bans, want 4", len(bans))
	}
	lifted, err := a.LiftWide(ctx, []string{"0.0.0.0/0"}, "test")
	if err != nil || len(lifted) != 2 {
		t.Fatalf("LiftWide(0.0.0.0/0) = %d bans, %v; want the 2 on IPv4", len(lifted), err)
	}
	lifted, err = a.LiftAll(ctx, "test")
	var keys []string
	for _, b := range lifted {
		keys = append(keys, b.Key.String())
	}
	slices.Sort(keys)
	if want := []string{"2001:db8::/32", protect.ConsumerKey("acme").String()}; err != nil || !slices.Equal(keys, want) {
		t.Fatalf("LiftAll() = %v, %v; want %v", keys, err, want)
	}
	if bans, err := a.Bans(ctx, admin.Filter{}); err != nil || bans == nil || len(bans) != 0 {
		t.Fatalf("Bans() after LiftAll = %v, %v; want [], not nil", bans, err)
	}
	if s := p.Stats(); s.BansLifted != 4 {
		t.Fatalf("Stats().BansLifted = %d, want 4", s.BansLifted)
	}
}
