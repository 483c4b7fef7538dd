package protect

import (
	"net/netip"
	"strings"
	"testing"
)

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
