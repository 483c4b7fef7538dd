package protect

import (
	"errors"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func bannedKeys(t *testing.T, p *Protector) []string {
	t.Helper()
	bans, err := p.Bans(t.Context(), BanFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range bans {
		out = append(out, b.Key.String())
	}
	slices.Sort(out)
	return out
}

func TestSecondsSaturates(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		-time.Second: 0, 0: 0, 1: 1, time.Second: 1, time.Second + 1: 2,
		math.MaxInt64: math.MaxInt64/int64(time.Second) + 1,
	} {
		if got := seconds(d); got != want {
			t.Errorf("seconds(%d) = %d, want %d", d, got, want)
		}
	}
}

// A CIDR that covers a whole address family, or most of one, is refused
// by Ban without Force and by Lift, with ErrWideTarget quoting it; LiftWide
// and Force take it. ::ffff:0:0/96 is 0.0.0.0/0 written mapped.
func TestWideTargets(t *testing.T) {
	p, _ := newTestProtector(t, Config{})
	ctx := t.Context()
	for _, target := range []string{"0.0.0.0/0", "::/0", "::ffff:0:0/96", "0.0.0.0/7", "128.0.0.0/1", "2000::/3", "2000::/15"} {
		if _, err := p.Ban(ctx, target, BanOptions{}); !errors.Is(err, ErrWideTarget) || !strings.Contains(err.Error(), strconv.Quote(target)) {
			t.Errorf("Ban(%q) = %v; want ErrWideTarget quoting it", target, err)
		}
		if _, err := p.Lift(ctx, target, "test"); !errors.Is(err, ErrWideTarget) {
			t.Errorf("Lift(%q) = %v; want ErrWideTarget", target, err)
		}
	}
	if got := bannedKeys(t, p); len(got) != 0 {
		t.Fatalf("bannedKeys() after refused bans = %v, want none", got)
	}
	for _, target := range []string{"10.0.0.0/8", "2a00::/16", "198.51.100.7", "2001:db8::/32", "consumer:acme"} {
		if _, err := p.Ban(ctx, target, BanOptions{}); err != nil {
			t.Errorf("Ban(%q) = %v", target, err)
		}
	}
	if _, err := p.Ban(ctx, "::ffff:0:0/96", BanOptions{Force: true}); err != nil {
		t.Fatalf("Ban(::ffff:0:0/96, Force) = %v, want nil", err)
	}
	if d, _ := p.VerifyAddr(ctx, netip.MustParseAddr("203.0.113.1")); d.Status != Banned {
		t.Fatalf("VerifyAddr(203.0.113.1) after a forced ban on ::ffff:0:0/96 = %v, want banned", d.Status)
	}
	lifted, err := p.LiftWide(ctx, "0.0.0.0/0", "test")
	if err != nil || len(lifted) != 3 {
		t.Fatalf("LiftWide(0.0.0.0/0) = %d bans, %v; want the 3 on IPv4", len(lifted), err)
	}
	if got, want := bannedKeys(t, p), []string{"2001:db8::/32", "2a00::/16", ConsumerKey("acme").String()}; !slices.Equal(got, want) {
		t.Fatalf("bannedKeys() after LiftWide(0.0.0.0/0) = %v, want %v", got, want)
	}
}
