package memstore

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/httpprotect/protect/store"
)

// crashEnv names the state file a child of TestStateFileKeepsAllows
// writes before it is killed.
const crashEnv = "PROTECT_TEST_ALLOW_CRASH_FILE"

// allowScope is the scope of the allowlist the crash test writes.
var allowScope = store.Scope{Namespace: "allow:", Limits: store.Limits{TTL: time.Minute, BanLimit: 2, BanDuration: time.Hour, BanFactor: 2, MaxBanDuration: 24 * time.Hour, OffenseWindow: 24 * time.Hour}}

// TestStateFileKeepsAllows: the allowlist entries a store wrote to its
// state file are there after the process is killed (SIGKILL, no Close),
// with their reasons and ends, and hold for Take at once.
func TestStateFileKeepsAllows(t *testing.T) {
	sp := crashed(t, "TestStateFileKeepsAllows", crashEnv, allowThenWait)
	if sp == nil {
		return // the child
	}
	al := sp.(store.Allowlist)
	list, err := al.Allows(t.Context())
	var got []string
	for _, e := range list {
		got = append(got, e.Key.String()+" "+e.Reason)
		if e.Range != (e.Key.Prefix.Bits() == 24) {
			t.Errorf("restored entry %s: Range = %v, want %v", e.Key, e.Range, !e.Range)
		}
	}
	slices.Sort(got)
	if want := []string{"192.0.2.1 monitor", "198.51.100.0/24 partner"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("Allows() after SIGKILL and Open = %q, %v; want %q (the removed entry gone)", got, err, want)
	}
	a := netip.MustParseAddr("198.51.100.20")
	if r, err := sp.Take(t.Context(), store.Key{Prefix: netip.PrefixFrom(a, 32)}, a, 1); err != nil || !r.Allowed {
		t.Fatalf("Take(%s) after restore = %+v, %v; want Allowed", a, r, err)
	}
}

// allowThenWait is the child: it writes three entries and removes one.
func allowThenWait(t *testing.T, sp Space) {
	al := sp.(store.Allowlist)
	for _, e := range []store.Ban{
		{Key: store.Key{Prefix: netip.MustParsePrefix("192.0.2.1/32")}, Reason: "monitor"},
		{Key: store.Key{Prefix: netip.MustParsePrefix("198.51.100.0/24")}, Range: true, Reason: "partner"},
		{Key: store.Key{Prefix: netip.MustParsePrefix("203.0.113.9/32")}, Reason: "removed"},
	} {
		if _, err := al.Allow(t.Context(), e, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := al.Disallow(t.Context(), store.Key{Prefix: netip.MustParsePrefix("203.0.113.9/32")}); !ok || err != nil {
		t.Fatalf("Disallow = %v, %v", ok, err)
	}
}

// A Take that checked the allowlist before an entry was added, and then
// wrote its ban, undoes the ban once it finds the entry: admin's lift
// may have come before the ban was written.
func TestTakeBanRacingAllow(t *testing.T) {
	s, _ := newTestMemoryStore(t, MemoryOptions{})
	lim := testLimits()
	lim.BanLimit = 2
	sp := memSpaceFor(t, s, "race:", lim).(*memSpace)
	ctx := t.Context()
	a := netip.MustParseAddr("192.0.2.90")
	k := store.Key{Prefix: netip.PrefixFrom(a, 32)}
	var r store.Result
	for i := 0; !r.NewBan; i++ { // the ban the racing Take writes
		if i == 100 {
			t.Fatalf("100 Takes of %s wrote no ban", k)
		}
		r = mustTake(t, sp, k, a)
	}
	if _, err := sp.Allow(ctx, store.Ban{Key: k, Reason: "race"}, 0); err != nil {
		t.Fatal(err)
	}
	sp.unlessAllowed(k, a, &r)
	if !r.Allowed || r.Banned() {
		t.Fatalf("unlessAllowed(%s) = %+v, want Allowed", k, r)
	}
	if st, _ := sp.Inspect(ctx, k); st.Ban != nil {
		t.Fatalf("Inspect(%s) after unlessAllowed = ban %+v, want none", k, st.Ban)
	}
}
