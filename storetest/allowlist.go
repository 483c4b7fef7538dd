package storetest

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/httpprotect/protect/store"
)

// A store whose Space is a store.Allowlist answers a key on it, or an
// address inside a range on it, with Result.Allowed and counts nothing,
// through Take and TakePlan alike, even past BanLimit and inside a range
// ban; refuses an operator's ban of what an entry covers (ErrAllowed)
// and a consumer's entry (ErrNotAllowable); lists its entries; counts
// again once an entry is removed or over; and, when it keeps a Journal,
// journals EventAllow, EventDisallow, and EventAllowExpire once a listing
// finds an entry over. A store without Allowlist skips
// the test.
func testAllowlist(t *testing.T, env *Env) {
	ctx := t.Context()
	sp := env.space(t, "allow:", limits(env.Unit))
	al, ok := sp.(store.Allowlist)
	if !ok {
		t.Skipf("%T is not a store.Allowlist: nothing to check", sp)
	}
	var since string
	j, journaled := sp.(store.Journal)
	if journaled {
		since = lastCursor(readJournal(t, j, ""))
	}

	hk, ha := host("192.0.2.70")
	rng := store.Key{Prefix: netip.MustParsePrefix("198.51.100.0/28")}
	inside := netip.MustParseAddr("198.51.100.9")
	ik := store.Key{Prefix: netip.PrefixFrom(inside, 32)}
	addBan(t, sp, store.Ban{Key: store.Key{Prefix: netip.MustParsePrefix("198.51.100.0/24")}, Range: true, Reason: "wide", Source: store.SourceManual}, 60*env.Unit)

	eh, err := al.Allow(ctx, store.Ban{Key: hk, Reason: "monitor", By: "ops"}, 0)
	if err != nil || eh.Key != hk || eh.Reason != "monitor" || eh.By != "ops" || eh.Permanent() != true || eh.Created.IsZero() {
		t.Fatalf("Allow(%s) = %+v, %v; want the entry, permanent, with its reason, by and creation", hk, eh, err)
	}
	er, err := al.Allow(ctx, store.Ban{Key: rng, Range: true, Reason: "partner"}, 3*env.Unit)
	if err != nil || er.Key != rng || !er.Range || er.Expires.IsZero() {
		t.Fatalf("Allow(%s, 3 units) = %+v, %v; want the range entry with an end", rng, er, err)
	}
	take(t, sp, hk, ha, 0) // a store that keeps a copy loads it on its first Take
	if !al.Holds(ha) || !al.Holds(inside) || al.Holds(netip.MustParseAddr("198.51.100.99")) {
		t.Fatalf("Holds(%s, %s, 198.51.100.99) = %v, %v, %v; want true, true, false", ha, inside,
			al.Holds(ha), al.Holds(inside), al.Holds(netip.MustParseAddr("198.51.100.99")))
	}
	for i := range 8 { // past BanLimit
		if r := take(t, sp, hk, ha, 1); !r.Allowed || r.Count != 0 || r.Banned() || r.NewBan {
			t.Fatalf("Take %d of allowed %s = %+v, want Allowed and nothing else", i+1, hk, r)
		}
		if r := take(t, sp, ik, inside, 1); !r.Allowed || r.Count != 0 || r.Banned() {
			t.Fatalf("Take %d of %s, inside allowed %s and banned 198.51.100.0/24, = %+v; want Allowed", i+1, inside, rng, r)
		}
	}
	plan := newPlan(t, "allow", store.Rate{Name: "allow", Limit: 1, Period: 10 * env.Unit})
	if r := takePlan(t, sp, hk, ha, plan, 5, true); !r.Allowed || r.Refused() || r.Count != 0 || r.Charged {
		t.Fatalf("TakePlan of allowed %s = %+v, want Allowed, nothing charged", hk, r)
	}
	if _, err := sp.AddBan(ctx, store.Ban{Key: hk, Reason: "x", Source: store.SourceManual}, env.Unit); !errors.Is(err, store.ErrAllowed) {
		t.Fatalf("AddBan(allowed %s) = %v, want ErrAllowed", hk, err)
	}
	if _, err := sp.AddBan(ctx, store.Ban{Key: ik, Reason: "x", Source: store.SourceManual}, env.Unit); !errors.Is(err, store.ErrAllowed) {
		t.Fatalf("AddBan(%s, inside allowed %s) = %v, want ErrAllowed", ik, rng, err)
	}
	if _, err := al.Allow(ctx, store.Ban{Key: store.Key{Name: "consumer"}}, 0); !errors.Is(err, store.ErrNotAllowable) {
		t.Fatalf("Allow(consumer) = %v, want ErrNotAllowable", err)
	}
	list, err := al.Allows(ctx)
	keys := func(bs []store.Ban) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.Key.String())
		}
		slices.Sort(out)
		return out
	}
	if want := []string{hk.String(), rng.String()}; err != nil || !slices.Equal(keys(list), want) {
		t.Fatalf("Allows() = %q, %v; want %q", keys(list), err, want)
	}

	if e, ok, err := al.Disallow(ctx, hk); !ok || err != nil || e.Key != hk {
		t.Fatalf("Disallow(%s) = %+v, %v, %v; want its entry", hk, e, ok, err)
	}
	if _, ok, err := al.Disallow(ctx, hk); ok || err != nil {
		t.Fatalf("Disallow(%s) again = %v, %v; want nothing removed", hk, ok, err)
	}
	if r := take(t, sp, hk, ha, 1); r.Allowed || r.Count != 1 || al.Holds(ha) {
		t.Fatalf("Take of %s after Disallow = %+v, Holds %v; want counted once, not held", hk, r, al.Holds(ha))
	}
	env.Wait(4 * env.Unit)
	if r := take(t, sp, ik, inside, 1); r.Allowed || !r.Banned() {
		t.Fatalf("Take of %s after its range's entry ended = %+v, want the range ban again", inside, r)
	}
	if list, err := al.Allows(ctx); err != nil || len(list) != 0 {
		t.Fatalf("Allows() after Disallow and the end = %q, %v; want none", keys(list), err)
	}
	if !journaled {
		return
	}
	var got []string
	for _, e := range readJournal(t, j, since) {
		if e.Kind == store.EventAllow || e.Kind == store.EventDisallow || e.Kind == store.EventAllowExpire {
			got = append(got, e.Kind.String()+" "+e.Ban.Key.String())
		}
	}
	// The range's entry ended; the listing above noticed it.
	want := []string{"allow " + hk.String(), "allow " + rng.String(), "disallow " + hk.String(), "allow-expire " + rng.String()}
	if !slices.Equal(got, want) {
		t.Fatalf("journal of the allowlist = %q, want %q", got, want)
	}
}
