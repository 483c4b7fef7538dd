package memstore

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"
)

// While the state file cannot be written (a full disk), what the writer
// keeps to write is the last state of each record, not one copy per
// flush: a hot key charged through a long outage must not grow the
// writer's memory without bound.
func TestStateFileFailingWriteKeepsOneOpPerRecord(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	s, err := OpenMemoryStore(MemoryOptions{Path: filepath.Join(t.TempDir(), "protect.db"), Logger: discardLogger(), SweepInterval: -1, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	j := s.journal
	// Stop the writer: the test flushes by hand, as the writer would.
	close(j.stop)
	<-j.done
	j.closeOnce.Do(func() {})
	defer s.Close()
	j.db.Close() // every write fails from here on
	lim := Limits{TTL: time.Minute, BanLimit: -1, BanFactor: 1}
	sp, err := s.Space(Scope{Namespace: "n", Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	plan := mustPlan(t, "p", Quota{Name: "q", Limit: 1 << 40, Period: Monthly})
	a := netip.MustParseAddr("192.0.2.1")
	for i := range 100 {
		if _, err := sp.TakePlan(ctx, Key{Name: "hot"}, a, plan, 1, false); err != nil {
			t.Fatal(err)
		}
		if _, err := sp.AddBan(ctx, Ban{Key: Key{Prefix: netip.PrefixFrom(a, 32)}, Source: SourceManual}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if j.flush(true) == nil {
			t.Fatalf("flush %d to a closed file succeeded", i)
		}
	}
	// One plan record, one ban record and one offense record.
	if n := len(j.pending); n > 3 {
		t.Errorf("after 100 failed flushes of one plan key and one ban the writer holds %d ops, want 3", n)
	}
}
