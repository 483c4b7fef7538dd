package redisstore

import (
	"net/netip"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// Check decides as Verify does but counts nothing and writes nothing: not
// the count, not the counter's expiry, on every store.
func TestCheckCountsNothing(t *testing.T) {
	type target struct {
		name string
		// make returns a protector on the store and a function that lets
		// d pass as the store sees it.
		make func(t *testing.T, cfg protect.Config) (*protect.Protector, func(time.Duration))
	}
	targets := []target{{"memory", func(t *testing.T, cfg protect.Config) (*protect.Protector, func(time.Duration)) {
		p, clk := newTestProtector(t, cfg)
		return p, clk.Advance
	}}, {"miniredis", func(t *testing.T, cfg protect.Config) (*protect.Protector, func(time.Duration)) {
		m := miniredis.RunT(t)
		in := newInstance(t, m.Addr(), "protect:", cfg, Options{RangeRefresh: -1})
		return in.p, m.FastForward
	}}, {"redis-server", func(t *testing.T, cfg protect.Config) (*protect.Protector, func(time.Duration)) {
		addr := realRedisAddr(t)
		in := newInstance(t, addr, testNamespace(t, addr), cfg, Options{RangeRefresh: -1})
		return in.p, time.Sleep
	}}}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			const limit = 3
			p, wait := tg.make(t, protect.Config{MaxRequests: limit, BanLimit: 10, TTL: 10 * time.Second, StoreTimeout: 10 * time.Second})
			ctx := t.Context()
			r := request("192.0.2.9:1234")
			key := protect.Key{Prefix: netip.MustParsePrefix("192.0.2.9/32")}
			check := func(step string) protect.Decision {
				t.Helper()
				d, err := p.Check(ctx, r)
				if err != nil || d.Err != nil {
					t.Fatalf("%s: Check = %v, %v", step, err, d.Err)
				}
				if d.Key != key || d.Addr != key.Prefix.Addr() {
					t.Fatalf("%s: Check.Key, Addr = %s, %v; want %s", step, d.Key, d.Addr, key)
				}
				return d
			}
			for i := range 2 {
				if d := check("before any request"); d.Status != protect.Allowed || d.Count != 0 || d.Remaining != limit || d.Refused() {
					t.Fatalf("Check %d before any request = %v count %d remaining %d; want allowed, 0, %d", i+1, d.Status, d.Count, d.Remaining, limit)
				}
			}
			if st, err := admin.New(p).InspectKey(ctx, key); err != nil || st.Count != 0 || st.CountTTL != 0 {
				t.Fatalf("Inspect after two Checks = %+v, %v; want no counter", st, err)
			}
			if d := verify(t, p, r); d.Status != protect.Allowed || d.Count != 1 {
				t.Fatalf("first Verify after two Checks = %v count %d; want allowed with count 1", d.Status, d.Count)
			}
			// A Check does not renew the counter's expiry.
			before, err := admin.New(p).InspectKey(ctx, key)
			if err != nil || before.Count != 1 || before.CountTTL <= 0 {
				t.Fatalf("Inspect after one Verify = %+v, %v", before, err)
			}
			wait(50 * time.Millisecond)
			if d := check("after one request"); d.Status != protect.Allowed || d.Count != 1 || d.Remaining != limit-1 {
				t.Fatalf("Check after one Verify = %v count %d remaining %d; want allowed, 1, %d", d.Status, d.Count, d.Remaining, limit-1)
			}
			if after, err := admin.New(p).InspectKey(ctx, key); err != nil || after.Count != 1 || after.CountTTL >= before.CountTTL {
				t.Fatalf("Inspect after a Check = %+v, %v; want count 1 and a CountTTL below %v", after, err, before.CountTTL)
			}
			for i := 2; i <= limit+1; i++ {
				d := verify(t, p, r)
				if d.Count != int64(i) || (d.Status == protect.Limited) != (i == limit+1) {
					t.Fatalf("Verify %d = %v count %d", i, d.Status, d.Count)
				}
			}
			for i := range 3 {
				d := check("past the limit")
				if d.Status != protect.Limited || d.Count != limit+1 || !d.Refused() || d.StatusCode() != 429 || d.RetryAfter != 10*time.Second {
					t.Fatalf("Check %d past the limit = %v count %d code %d retry %v; want limited with count %d, 429, 10s",
						i+1, d.Status, d.Count, d.StatusCode(), d.RetryAfter, limit+1)
				}
			}
			if st, err := admin.New(p).InspectKey(ctx, key); err != nil || st.Count != limit+1 {
				t.Fatalf("Inspect.Count after Checks past the limit = %d, %v; want %d", st.Count, err, limit+1)
			}
			if d := verify(t, p, r); d.Count != limit+2 || d.Status != protect.Limited {
				t.Fatalf("Verify after Checks = %v count %d; want limited with count %d", d.Status, d.Count, limit+2)
			}
			// A ban answers a Check too.
			if _, err := p.Ban(ctx, "192.0.2.9", protect.BanOptions{For: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if d := check("banned"); d.Status != protect.Banned || !d.Refused() || d.Ban == nil || d.Ban.Key != key {
				t.Fatalf("Check of a banned client = %v, ban %+v; want banned by the ban on %s", d.Status, d.Ban, key)
			}
		})
	}
}
