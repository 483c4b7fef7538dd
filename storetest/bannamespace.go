package storetest

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/httpprotect/protect/store"
)

// scoped binds the environment's store to a Scope whose namespaces are
// the environment's plus the given suffixes (ban "" leaves BanNamespace
// empty: the namespace itself).
func (env *Env) scoped(t *testing.T, ns, ban string, lim store.Limits) store.Space {
	t.Helper()
	sc := store.Scope{Namespace: env.Namespace + ns, Limits: lim}
	if ban != "" {
		sc.BanNamespace = env.Namespace + ban
	}
	sp, err := env.Store.Space(sc)
	if err != nil {
		t.Fatalf("Space(%+v) = %v", sc, err)
	}
	return sp
}

// Spaces with different Namespaces and one BanNamespace count apart and
// share one ban list: key, range and consumer bans, automatic or manual,
// written through one refuse in the other, are listed, inspected and
// lifted through either, and offenses escalate across them. A space with
// another BanNamespace sees none of it. An empty BanNamespace is the
// Namespace.
func testBanNamespaces(t *testing.T, env *Env) {
	ctx := t.Context()
	lim := limits(env.Unit)
	login := env.scoped(t, "login:", "bans:", lim)
	api := env.scoped(t, "api:", "bans:", lim)
	apart := env.scoped(t, "apart:", "otherbans:", lim)

	k, a := host("192.0.2.50")
	for range 3 {
		take(t, login, k, a, 1)
	}
	if r := take(t, api, k, a, 1); r.Count != 1 {
		t.Fatalf("Take in a second namespace sharing the ban list = count %d, want 1: counters are apart", r.Count)
	}
	for range 2 {
		take(t, login, k, a, 1)
	}
	if r := take(t, login, k, a, 1); !r.NewBan || r.Ban.Offense != 1 {
		t.Fatalf("Take #6 through login = %+v, want a new ban", r)
	}
	if r := take(t, api, k, a, 1); !r.Banned() || r.NewBan || r.Ban.Source != store.SourceAuto || r.Count != 0 {
		t.Fatalf("Take through api after login banned %s = %+v, want refused by login's ban, nothing counted", k, r)
	}
	if r := take(t, apart, k, a, 1); r.Banned() || r.Count != 1 {
		t.Fatalf("Take through another ban namespace = %+v, want count 1, not banned", r)
	}
	if st, err := api.Inspect(ctx, k); err != nil || st.Ban == nil || st.Offenses != 1 || st.Count != 1 {
		t.Fatalf("Inspect(%s) through api = %+v, %v; want login's ban, 1 offense, api's own count 1", k, st, err)
	}
	if _, ok, err := api.Lift(ctx, k); !ok || err != nil {
		t.Fatalf("Lift(%s) through api = %v, %v; want login's ban lifted", k, ok, err)
	}
	if r := take(t, login, k, a, 1); r.Banned() || r.Count != 1 {
		t.Fatalf("Take through login after api lifted = %+v, want count 1 (the ban reset login's counter), not banned", r)
	}
	// The offense history is the ban namespace's: a second ban through
	// api is the client's second offense.
	take(t, api, k, a, 4)
	if r := take(t, api, k, a, 2); !r.NewBan || r.Ban.Offense != 2 || r.BanLeft != store.BanLength(&lim, 2) {
		t.Fatalf("ban through api after one through login = %+v, want offense 2 of length %v", r, store.BanLength(&lim, 2))
	}

	rng := store.Key{Prefix: netip.MustParsePrefix("198.51.100.0/24")}
	addBan(t, login, store.Ban{Key: rng, Range: true, Source: store.SourceManual, Reason: "scanner"}, 30*env.Unit)
	consumer := store.Key{Name: "cus_shared"}
	addBan(t, api, store.Ban{Key: consumer, Source: store.SourceManual, Reason: "fraud"}, 30*env.Unit)
	inside, ia := host("198.51.100.9")
	for _, c := range []struct {
		sp     store.Space
		name   string
		k      store.Key
		a      netip.Addr
		banned bool
	}{
		{api, "api", inside, ia, true},
		{login, "login", consumer, netip.Addr{}, true},
		{apart, "apart", inside, ia, false},
		{apart, "apart", consumer, netip.Addr{}, false},
	} {
		if r := take(t, c.sp, c.k, c.a, 1); r.Banned() != c.banned {
			t.Errorf("Take(%s) through %s = %+v, want banned %v", c.k, c.name, r, c.banned)
		}
	}
	plan := newPlan(t, "shared", store.Rate{Limit: 10, Period: env.Unit})
	if r := takePlan(t, login, consumer, netip.Addr{}, plan, 1, false); !r.Banned() || r.Decider != -1 {
		t.Errorf("TakePlan(%s) through login = %+v, want refused by api's ban", consumer, r)
	}
	want := "[192.0.2.50 198.51.100.0/24 cus_shared]"
	for _, c := range []struct {
		sp   store.Space
		name string
	}{{login, "login"}, {api, "api"}} {
		got := keys(bans(t, c.sp, store.BanFilter{}))
		slices.Sort(got)
		if fmt.Sprint(got) != want {
			t.Errorf("Bans through %s = %s, want %s", c.name, got, want)
		}
	}
	if got := bans(t, apart, store.BanFilter{}); len(got) != 0 {
		t.Errorf("Bans through another ban namespace = %v, want none", keys(got))
	}

	// An empty BanNamespace is the Namespace: its bans are those of a
	// space that names it as its ban namespace.
	plain := env.scoped(t, "plain:", "", lim)
	guest := env.scoped(t, "guest:", "plain:", lim)
	k2, a2 := host("203.0.113.50")
	addBan(t, plain, store.Ban{Key: k2, Source: store.SourceManual}, 30*env.Unit)
	if r := take(t, guest, k2, a2, 1); !r.Banned() {
		t.Errorf("Take through a space whose BanNamespace is another's Namespace = %+v, want banned", r)
	}
	if r := take(t, api, k2, a2, 1); r.Banned() {
		t.Errorf("Take through an unrelated ban namespace = %+v, want not banned", r)
	}
}
