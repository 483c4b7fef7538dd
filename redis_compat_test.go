package protect

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Bans written by the release before the one-record format keep holding:
// a key ban stored as a hash, and range records "expires|created|source|
// by|reason", are enforced, listed, inspected and lifted, and never
// dropped on the way.
func TestRedisBansOfAnEarlierRelease(t *testing.T) {
	for _, env := range []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"miniredis", func(t *testing.T) string { return miniredis.RunT(t).Addr() }},
		{"redis-server", func(t *testing.T) string { return realRedisAddr(t) }},
	} {
		t.Run(env.name, func(t *testing.T) {
			addr := env.addr(t)
			ns := testNamespace(t, addr)
			in := newInstance(t, addr, ns, Config{OnStoreError: FailOpen}, RedisOptions{RangeRefresh: -1})
			ctx := t.Context()
			c := in.store.client
			now := time.Now().UnixMilli()
			// As the earlier release wrote them.
			c.HSet(ctx, ns+"{192.0.2.9}:b", "key", "192.0.2.9", "reason", "old manual", "source", "manual", "by", "ops",
				"created", now, "expires", now+3600_000, "offense", 0)
			c.PExpire(ctx, ns+"{192.0.2.9}:b", time.Hour)
			c.HSet(ctx, ns+"ranges", "198.51.100.0/24", "0|"+strconv.FormatInt(now, 10)+"|manual|ops|old | range")

			for _, a := range []string{"192.0.2.9", "198.51.100.7"} {
				if d, _ := in.p.VerifyAddr(ctx, netip.MustParseAddr(a)); d.Status != Banned || d.Err != nil {
					t.Fatalf("VerifyAddr(%s) = %v (err %v), want banned by the earlier release's ban", a, d.Status, d.Err)
				}
			}
			if ttl := c.PTTL(ctx, ns+"{192.0.2.9}:b").Val(); ttl <= 59*time.Minute || c.Type(ctx, ns+"{192.0.2.9}:b").Val() != "string" {
				t.Fatalf("upgraded key ban: type %s, ttl %v; want a string keeping its hour", c.Type(ctx, ns+"{192.0.2.9}:b").Val(), ttl)
			}
			bans, err := in.p.Bans(ctx, BanFilter{})
			if err != nil || len(bans) != 2 {
				t.Fatalf("Bans = %+v, %v; want the two earlier bans", bans, err)
			}
			for _, b := range bans {
				switch b.Key.String() {
				case "192.0.2.9":
					if b.Reason != "old manual" || b.By != "ops" || b.Permanent() {
						t.Fatalf("key ban = %+v", b)
					}
				case "198.51.100.0/24":
					if b.Reason != "old | range" || !b.Permanent() || !b.Range || b.Created.UnixMilli() != now {
						t.Fatalf("range ban = %+v", b)
					}
				default:
					t.Fatalf("unexpected ban %+v", b)
				}
			}
			if lifted, err := in.p.Lift(ctx, "198.51.100.0/24", "test"); err != nil || len(lifted) != 1 {
				t.Fatalf("Lift(range) = %+v, %v", lifted, err)
			}
			if d, _ := in.p.VerifyAddr(ctx, netip.MustParseAddr("198.51.100.7")); d.Status != Allowed {
				t.Fatalf("VerifyAddr after lifting the range = %v, want allowed", d.Status)
			}
		})
	}
}

// A hash at a ban key that no release wrote is not a ban: it stays an
// error for the failure policy, and never reaches a response.
func TestRedisUnknownHashAtBanKey(t *testing.T) {
	m := miniredis.RunT(t)
	in := newInstance(t, m.Addr(), "protect:", Config{OnStoreError: FailOpen}, RedisOptions{RangeRefresh: -1})
	in.store.client.HSet(t.Context(), "protect:{192.0.2.10}:b", "x", "y")
	d, _ := in.p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.10"))
	if d.Err == nil || !strings.Contains(d.Err.Error(), "WRONGTYPE") || d.Refused() {
		t.Fatalf("VerifyAddr = %v, err %v; want served under FailOpen with the WRONGTYPE error kept for logs", d.Status, d.Err)
	}
}

// Listing bans skips a key that holds no ban record of any release, and
// still lists the others.
func TestRedisListingSkipsStrayKeys(t *testing.T) {
	m := miniredis.RunT(t)
	in := newInstance(t, m.Addr(), "protect:", Config{}, RedisOptions{RangeRefresh: -1})
	in.store.client.HSet(t.Context(), "protect:{192.0.2.10}:b", "x", "y")
	if _, err := in.p.Ban(t.Context(), "192.0.2.11", BanOptions{Reason: "real"}); err != nil {
		t.Fatal(err)
	}
	bans, err := in.p.Bans(t.Context(), BanFilter{})
	if err != nil || len(bans) != 1 || bans[0].Key.String() != "192.0.2.11" {
		t.Fatalf("Bans = %+v, %v; want only the ban on 192.0.2.11", bans, err)
	}
}
