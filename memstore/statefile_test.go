package memstore

import (
	"context"
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/logtest"
	bolt "go.etcd.io/bbolt"
)

// openDurable opens a state file on clk, closed in t.Cleanup (a second
// Close is harmless).
func openDurable(t *testing.T, path string, clk *fakeClock, log *slog.Logger) *MemoryStore {
	t.Helper()
	if log == nil {
		log = discardLogger()
	}
	opt := MemoryOptions{Path: path, Logger: log, SweepInterval: -1}
	if clk != nil {
		opt.Clock = clk.Now
	}
	s, err := OpenMemoryStore(opt)
	if err != nil {
		t.Fatalf("OpenMemoryStore(%s) = %v, want a store", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStateFileSkipsMalformedRecords(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "protect.db")
	clk := newFakeClock()
	store := openDurable(t, path, clk, nil)
	sp := durableSpace(t, store)
	if _, err := sp.AddBan(ctx, Ban{Key: hostKey("192.0.2.5"), Source: SourceManual}, time.Hour); err != nil {
		t.Fatal(err)
	}
	store.Close()

	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	good := appendDiskKey(nil, "protect:", kindAddr, Key{Prefix: netip.MustParsePrefix("192.0.2.6/32")})
	err = db.Update(func(tx *bolt.Tx) error {
		bans := tx.Bucket(bucketBans)
		bans.Put([]byte("\xff\xff garbage key"), []byte{recordVersion})
		bans.Put(good, []byte{recordVersion, 200, 'x'}) // a reason longer than the record
		return tx.Bucket(bucketPlans).Put(good, []byte{9, 9, 9})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	var rec logtest.Recorder
	store = openDurable(t, path, clk, slog.New(&rec))
	sp = durableSpace(t, store)
	if r := mustTake(t, sp, hostKey("192.0.2.5"), netip.Addr{}); !r.Banned() {
		t.Errorf("Take(192.0.2.5) beside malformed records = %+v, want banned", r)
	}
	if r := mustTake(t, sp, hostKey("192.0.2.6"), netip.Addr{}); r.Banned() || r.Count != 1 {
		t.Errorf("Take(192.0.2.6), whose record is malformed = %+v, want count 1, not banned", r)
	}
	if n := rec.Count("protect: state file record skipped"); n != 3 {
		t.Errorf("records skipped logged = %d, want 3", n)
	}
}

// The sweep of a running store deletes the records of what it drops, so
// that a long-running service's file does not keep every ban it ever
// wrote.
func TestStateFileSweepDeletesRecords(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "protect.db")
	clk := newFakeClock()
	store := openDurable(t, path, clk, nil)
	sp := durableSpace(t, store)
	for range 3 { // past BanLimit 2: an automatic ban and an offense
		mustTake(t, sp, hostKey("192.0.2.7"), netip.Addr{})
	}
	if _, err := sp.AddBan(ctx, Ban{Key: hostKey("192.0.2.8"), Source: SourceManual}, time.Minute); err != nil {
		t.Fatal(err)
	}
	rng := Key{Prefix: netip.MustParsePrefix("198.51.100.0/24")}
	if _, err := sp.AddBan(ctx, Ban{Key: rng, Range: true, Source: SourceManual}, time.Minute); err != nil {
		t.Fatal(err)
	}
	plan, err := NewPlan("hourly", Quota{Limit: 10, Period: Hourly})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := sp.TakePlan(ctx, Key{Name: "acme"}, netip.Addr{}, plan, 1, false); err != nil || !r.Charged {
		t.Fatalf("TakePlan(acme) = %+v, %v; want charged", r, err)
	}
	if err := store.journal.sync(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(8 * 24 * time.Hour) // past every ban, quota window and the offense window
	store.sweep()
	store.Close()
	for _, b := range [][]byte{bucketBans, bucketOffenses, bucketPlans} {
		if n := countRecords(t, path, b); n != 0 {
			t.Errorf("%s records after a sweep past their end = %d, want 0", b, n)
		}
	}
}

// TestStateFileBanSurvivesRestartOfShortBan shows a ban that ends while
// the file is closed stays gone after a second restart: the open deleted
// its record.
func TestStateFileDropsExpiredRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "protect.db")
	clk := newFakeClock()
	store := openDurable(t, path, clk, nil)
	if _, err := durableSpace(t, store).AddBan(t.Context(), Ban{Key: hostKey("192.0.2.9"), Source: SourceManual}, time.Minute); err != nil {
		t.Fatal(err)
	}
	store.Close()
	clk.Advance(2 * time.Minute)
	openDurable(t, path, clk, nil).Close()
	if n := countRecords(t, path, bucketBans); n != 0 {
		t.Errorf("ban records after an open past their end = %d, want 0", n)
	}
}

func countRecords(t *testing.T, path string, bucket []byte) int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucket).Stats().KeyN
		return nil
	})
	return n
}

// durableSpace binds store as a protector with the defaults does, but
// banning at the third request of a stream.
func durableSpace(t *testing.T, st *Store) Space {
	t.Helper()
	lim := testLimits()
	lim.BanLimit = 2
	return memSpaceFor(t, st, "protect:", lim)
}

// hostKey is the key of one address.
func hostKey(s string) Key {
	a := netip.MustParseAddr(s)
	return Key{Prefix: netip.PrefixFrom(a, a.BitLen())}
}
