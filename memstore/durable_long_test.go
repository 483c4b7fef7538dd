package memstore

import (
	"context"
	"math"
	"net/netip"
	"path/filepath"
	"testing"
	"time"
)

// A ban whose end lies past what Unix nanoseconds can hold (a Space's
// AddBan of math.MaxInt64, an automatic ban whose length saturated) must
// be written as "later than anything", not wrap into a negative expiry
// that the restore skips as malformed, lifting the ban at the restart.
// So must an offense history kept that long.
func TestStateFileKeepsVeryLongBans(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "protect.db")
	clk := newFakeClock()
	const long = time.Duration(math.MaxInt64)
	lim := Limits{TTL: time.Minute, BanLimit: 1, BanDuration: long, BanFactor: 1, MaxBanDuration: long, OffenseWindow: long}
	space := func(s *MemoryStore) Space {
		sp, err := s.Space(Scope{Namespace: "long", Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	store := openDurable(t, path, clk, nil)
	sp := space(store)
	manual, auto := netip.MustParsePrefix("192.0.2.9/32"), netip.MustParsePrefix("192.0.2.10/32")
	if _, err := sp.AddBan(ctx, Ban{Key: Key{Prefix: manual}, Source: SourceManual}, long); err != nil {
		t.Fatal(err)
	}
	var last Result
	for range 2 {
		last, _ = sp.Take(ctx, Key{Prefix: auto}, auto.Addr(), 1)
	}
	if !last.NewBan {
		t.Fatalf("Take past BanLimit = %+v, want a new ban", last)
	}
	store.Close()
	store = openDurable(t, path, clk, nil)
	sp = space(store)
	for _, p := range []netip.Prefix{manual, auto} {
		if r, _ := sp.Take(ctx, Key{Prefix: p}, p.Addr(), 0); !r.Banned() {
			t.Errorf("Take(%v) after the restart = %+v, want banned (the ban has centuries left)", p, r)
		}
	}
	st, _ := sp.Inspect(ctx, Key{Prefix: auto})
	if st.Offenses != 1 {
		t.Errorf("Inspect(%v).Offenses after the restart = %d, want 1", auto, st.Offenses)
	}
}
