package redisstore

import (
	"math"
	"net/netip"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	protect "github.com/httpprotect/protect"
	"github.com/redis/go-redis/v9"
)

// A hash at a ban key is not a ban: it stays an error for the failure
// policy, and never reaches a response.
func TestRedisUnknownHashAtBanKey(t *testing.T) {
	m := miniredis.RunT(t)
	in := newInstance(t, m.Addr(), "protect:", protect.Config{OnStoreError: protect.FailOpen}, Options{RangeRefresh: -1})
	in.store.client.HSet(t.Context(), "protect:{192.0.2.10}:b", "x", "y")
	d, _ := in.p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.10"))
	if d.Err == nil || !strings.Contains(d.Err.Error(), "WRONGTYPE") || d.Refused() {
		t.Fatalf("VerifyAddr(192.0.2.10) = %v, err %v; want served under FailOpen with the WRONGTYPE error kept for logs", d.Status, d.Err)
	}
}

// Listing bans skips an index entry whose key holds no ban record, and
// still lists the others.
func TestRedisListingSkipsStrayKeys(t *testing.T) {
	m := miniredis.RunT(t)
	in := newInstance(t, m.Addr(), "protect:", protect.Config{}, Options{RangeRefresh: -1})
	in.store.client.HSet(t.Context(), "protect:{192.0.2.10}:b", "x", "y")
	// Indexed, so that the listing reads the stray key and must skip it.
	in.store.client.ZAdd(t.Context(), "protect:bans", redis.Z{Score: math.Inf(1), Member: "192.0.2.10"})
	if _, err := in.p.Ban(t.Context(), "192.0.2.11", protect.BanOptions{Reason: "real"}); err != nil {
		t.Fatal(err)
	}
	bans, err := in.p.Bans(t.Context(), protect.BanFilter{})
	if err != nil || len(bans) != 1 || bans[0].Key.String() != "192.0.2.11" {
		t.Fatalf("Bans() = %+v, %v; want only the ban on 192.0.2.11", bans, err)
	}
}
