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
	"unicode/utf8"

	"github.com/httpprotect/protect/store"
)

func bannedKeys(t *testing.T, p *Protector) []string {
	t.Helper()
	bans, err := p.bans(t.Context(), BanFilter{})
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
// by Ban without Force, with ErrWideTarget quoting it; Force takes it, and
// Lift takes any width. ::ffff:0:0/96 is 0.0.0.0/0 written mapped.
func TestWideTargets(t *testing.T) {
	p, _ := newTestProtector(t, Config{})
	ctx := t.Context()
	for _, target := range []string{"0.0.0.0/0", "::/0", "::ffff:0:0/96", "0.0.0.0/7", "128.0.0.0/1", "2000::/3", "2000::/15"} {
		if _, err := p.Ban(ctx, target, BanOptions{}); !errors.Is(err, ErrWideTarget) || !strings.Contains(err.Error(), strconv.Quote(target)) {
			t.Errorf("Ban(%q) = %v; want ErrWideTarget quoting it", target, err)
		}
		if lifted, err := p.Lift(ctx, target, "test"); err != nil || len(lifted) != 0 {
			t.Errorf("Lift(%q) = %v, %v; want nothing lifted, no error (package admin refuses it)", target, lifted, err)
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
	lifted, err := p.Lift(ctx, "0.0.0.0/0", "test")
	if err != nil || len(lifted) != 3 {
		t.Fatalf("Lift(0.0.0.0/0) = %d bans, %v; want the 3 on IPv4", len(lifted), err)
	}
	if got, want := bannedKeys(t, p), []string{"2001:db8::/32", "2a00::/16", ConsumerKey("acme").String()}; !slices.Equal(got, want) {
		t.Fatalf("bannedKeys() after Lift(0.0.0.0/0) = %v, want %v", got, want)
	}
}

// A hashed consumer key typed in capitals (as an operator may copy it from
// a log viewer that upper-cases hex) names the key Verify counts, not a
// key that nothing counts: Target and ParseKey fold it to the lowercase
// form ConsumerKey makes.
func TestHashedKeyCase(t *testing.T) {
	const id = "sk_live_0123456789abcdefghijklmnop" // hashed: a secret's shape
	want := ConsumerKey(id)
	if !strings.HasPrefix(want.Name, "~") {
		t.Fatalf("ConsumerKey(%q) = %q, want a hashed key", id, want.Name)
	}
	upper := "~" + strings.ToUpper(want.Name[1:])
	mixed := want.Name[:10] + strings.ToUpper(want.Name[10:])
	p, _ := newTestProtector(t, Config{})
	for _, s := range []string{want.Name, upper, mixed} {
		k, isRange, err := p.target(ConsumerPrefix + s)
		if err != nil || isRange || k != want {
			t.Errorf("Target(consumer:%s) = %v %v %v; want %v", s, k, isRange, err, want)
		}
		k, err = ParseKey(s)
		if err != nil || k != want {
			t.Errorf("ParseKey(%s) = %v %v; want %v", s, k, err, want)
		}
	}

	// The ban an operator writes that way refuses the consumer.
	if _, err := p.Ban(t.Context(), ConsumerPrefix+upper, BanOptions{}); err != nil {
		t.Fatal(err)
	}
	if d, _ := p.VerifyKey(t.Context(), id); d.Status != Banned {
		t.Fatalf("VerifyKey(%q) after a ban on consumer:%s = %v, want Banned", id, upper, d.Status)
	}
}

// A consumer whose id looks like an address is named, in a target, by
// the id or by its key ("~" and the id), as listings show it; either
// bans the consumer and never the address.
func TestAddressShapedConsumerTarget(t *testing.T) {
	p, _ := newTestProtector(t, Config{})
	const id = "203.0.113.7"
	want := Key{Name: "~" + id}
	for _, s := range []string{id, "~" + id} {
		k, isRange, err := p.target(ConsumerPrefix + s)
		if err != nil || isRange || k != want {
			t.Errorf("Target(consumer:%s) = %v %v %v; want %v", s, k, isRange, err, want)
		}
	}
	if k, err := ParseKey("~" + id); err != nil || k != want {
		t.Errorf("ParseKey(~%s) = %v %v; want %v", id, k, err, want)
	}
	if k, err := ParseKey("~x.y"); err == nil {
		t.Errorf("ParseKey(~x.y) = %v, want an error: no form of ConsumerKey's", k)
	}
	if _, err := p.Ban(t.Context(), ConsumerPrefix+"~"+id, BanOptions{}); err != nil {
		t.Fatalf("Ban(consumer:~%s) = %v, want no error", id, err)
	}
	if d, _ := p.VerifyKey(t.Context(), id); d.Status != Banned {
		t.Fatalf("VerifyKey(%q) after a ban on consumer:~%s = %v, want Banned", id, id, d.Status)
	}
	if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr(id)); d.Status != Allowed {
		t.Fatalf("VerifyAddr(%s) after a ban on the consumer = %v, want Allowed", id, d.Status)
	}
}

// CheckBan cuts a reason and an author to MaxReasonLen bytes, never
// inside a character, whatever path brought them to a store.
func TestCheckBanCutsReason(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{strings.Repeat("r", MaxReasonLen), MaxReasonLen},
		{strings.Repeat("r", MaxReasonLen+1), MaxReasonLen},
		{strings.Repeat("r", MaxReasonLen-1) + "東", MaxReasonLen - 1},
		{strings.Repeat("x", 10_000), MaxReasonLen},
	} {
		b, err := store.CheckBan(Ban{Key: Key{Name: "cus"}, Source: SourceManual, Reason: tc.in, By: tc.in})
		if err != nil || len(b.Reason) != tc.want || len(b.By) != tc.want || !utf8.ValidString(b.Reason) {
			t.Fatalf("CheckBan(reason of %d bytes) = reason of %d bytes, by of %d, %v; want %d", len(tc.in), len(b.Reason), len(b.By), err, tc.want)
		}
	}
}
