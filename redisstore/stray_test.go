package redisstore

import (
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	protect "github.com/httpprotect/protect"
	"github.com/redis/go-redis/v9"
)

// A hash at a ban key is no ban: it is damage to that one key, as a
// string that is no ban record is. The request is decided as if it were
// absent and counted, under FailClosed too, with no error for the failure
// policy; the circuit stays closed; and lifting removes it.
func TestRedisUnknownHashAtBanKey(t *testing.T) {
	m := miniredis.RunT(t)
	in := newInstance(t, m.Addr(), "protect:", protect.Config{OnStoreError: protect.FailClosed}, Options{RangeRefresh: -1})
	in.store.client.HSet(t.Context(), "protect:{192.0.2.10}:b", "x", "y")
	for i := range 3 {
		d, err := in.p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.10"))
		if err != nil || d.Status != protect.Allowed || d.Count != int64(i+1) {
			t.Fatalf("VerifyAddr(192.0.2.10) #%d = %v, count %d, err %v, %v; want allowed, count %d", i+1, d.Status, d.Count, d.Err, err, i+1)
		}
	}
	if st := in.p.Stats(); st.Malformed == 0 || st.StoreErrors != 0 {
		t.Fatalf("Stats() = %d malformed, %d store errors; want the hash counted as malformed, no store error", st.Malformed, st.StoreErrors)
	}
	lifted, err := in.p.Lift(t.Context(), "192.0.2.10", "test")
	if err != nil || len(lifted) != 1 || lifted[0].Malformed == "" || !strings.Contains(lifted[0].Malformed, "a key of another type") {
		t.Fatalf("Lift(192.0.2.10) = %+v, %v; want the hash lifted as a malformed record", lifted, err)
	}
	if m.Exists("protect:{192.0.2.10}:b") {
		t.Fatal("the hash is still at the ban key after the lift")
	}
}

// Listing bans lists an index entry whose key holds a key of another
// type as a damaged record, for an operator to see and lift, beside the
// others.
func TestRedisListingShowsStrayKeys(t *testing.T) {
	m := miniredis.RunT(t)
	in := newInstance(t, m.Addr(), "protect:", protect.Config{}, Options{RangeRefresh: -1})
	in.store.client.HSet(t.Context(), "protect:{192.0.2.10}:b", "x", "y")
	// Indexed, so that the listing reads the stray key and must skip it.
	in.store.client.ZAdd(t.Context(), "protect:bans", redis.Z{Score: math.Inf(1), Member: "192.0.2.10"})
	if _, err := in.p.Ban(t.Context(), "192.0.2.11", protect.BanOptions{Reason: "real"}); err != nil {
		t.Fatal(err)
	}
	bans, err := in.p.Bans(t.Context(), protect.BanFilter{})
	slices.SortFunc(bans, func(a, b protect.Ban) int { return strings.Compare(a.Key.String(), b.Key.String()) })
	if err != nil || len(bans) != 2 || bans[0].Key.String() != "192.0.2.10" || !strings.Contains(bans[0].Malformed, "a key of another type") ||
		bans[1].Key.String() != "192.0.2.11" || bans[1].Malformed != "" {
		t.Fatalf("Bans() = %+v, %v; want the hash at 192.0.2.10 as a malformed record and the ban on 192.0.2.11", bans, err)
	}
}
