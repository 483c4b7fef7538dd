package redisstore

import (
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/store"
)

// Published limits come back after Redis loses them (a FLUSHALL, a
// restart without persistence) within republishEvery of the running
// store, and expire on their own: the key has a TTL of publishedTTL, which
// the store keeps renewing while it runs.
func TestRedisRepublish(t *testing.T) {
	srv := redistest.Start(t)
	in := newInstance(t, srv.Addr, "svc:", protect.Config{MaxRequests: 100, BanLimit: 200}, Options{RangeRefresh: -1})
	ctx := t.Context()
	published := func() (store.Limits, bool) {
		t.Helper()
		lim, ok, err := in.store.Published(ctx, "svc:")
		if err != nil {
			t.Fatal(err)
		}
		return lim, ok
	}
	lim, ok := published()
	if !ok || lim.MaxRequests != 100 || lim.BanLimit != 200 {
		t.Fatalf("Published = %+v, %v; want 100/200", lim, ok)
	}
	ttl := func() time.Duration {
		t.Helper()
		d, err := in.store.client.PTTL(ctx, "svc:limits").Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := ttl(); d <= publishedTTL-time.Minute || d > publishedTTL {
		t.Fatalf("PTTL svc:limits = %v, want about %v", d, publishedTTL)
	}
	for _, lose := range []struct {
		name string
		do   func()
	}{
		{"FLUSHALL", func() { srv.Do("FLUSHALL") }},
		{"restart", srv.Restart},
	} {
		lose.do()
		if _, ok := published(); ok {
			t.Fatalf("after %s: Published = ok, want the limits gone", lose.name)
		}
		in.store.Refresh(ctx) // the first refresh after the loss may fail on the old connection
		in.clock.Advance(republishEvery)
		if err := in.store.Refresh(ctx); err != nil {
			t.Fatalf("after %s: Refresh = %v", lose.name, err)
		}
		if lim, ok := published(); !ok || lim.MaxRequests != 100 || lim.BanLimit != 200 {
			t.Fatalf("after %s and a refresh: Published = %+v, %v; want 100/200 again", lose.name, lim, ok)
		}
		if d := ttl(); d <= publishedTTL-time.Minute || d > publishedTTL {
			t.Fatalf("after %s: PTTL svc:limits = %v, want about %v", lose.name, d, publishedTTL)
		}
	}
	// Within republishEvery, a refresh writes nothing: a refresh runs
	// every RangeRefresh, and one SET per namespace a tick is not needed.
	srv.Do("DEL", "svc:limits")
	in.clock.Advance(republishEvery / 2)
	in.store.Refresh(ctx)
	if _, ok := published(); ok {
		t.Fatalf("Published again within republishEvery, want only once every %v", republishEvery)
	}
}
