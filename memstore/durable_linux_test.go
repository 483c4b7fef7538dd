package memstore

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/needs"
)

// On a full disk the bans that cannot be written stay pending, the
// failure is logged once, and Close returns it, naming the file: the
// caller knows what the file lacks. What reached the disk before it
// filled comes back, to the ban.
func TestStateFileFullDisk(t *testing.T) {
	dir := needs.Tmpfs(t, 4<<20)
	path := filepath.Join(dir, "protect.db")
	clk := newFakeClock()
	var log jsonLog
	s := openDurable(t, path, clk, log.logger())
	sp, err := s.Space(Scope{Namespace: "protect:", Limits: Limits{TTL: time.Minute, BanLimit: -1, BanFactor: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ban := func(from, to int) {
		for i := from; i < to; i++ {
			b := Ban{Key: Key{Prefix: netip.PrefixFrom(banAddr(i), 32)}, Source: SourceManual, Reason: "abuse", By: "ops"}
			if _, err := sp.AddBan(context.Background(), b, 24*time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	pauseWriter(s) // the test takes the writer's steps
	ban(0, 500)
	if err := s.journal.flush(true); err != nil {
		t.Fatalf("flush() before the disk is full = %v, want nil", err)
	}
	needs.Fill(t, dir)
	ban(500, 2000)
	for range 2 { // the retry fails as the first write did, unlogged
		if err := s.journal.flush(true); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("flush() on the full disk = %v, want ENOSPC", err)
		}
	}
	// A ban record and an offense record for each are kept to write; the
	// events are read again from the journal.
	if n := len(s.journal.pending); n != 3000 {
		t.Errorf("records pending = %d, want 3000", n)
	}
	err = s.Close()
	// A ban record, an offense record and an event for each.
	want := fmt.Sprintf("protect: state file %s: 4500 records not written at close: write %s: no space left on device", path, path)
	if err == nil || err.Error() != want || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Close() on the full disk = %v, want %q", err, want)
	}
	line := log.only(t, "protect: state file write failed; retrying")
	wantLine := map[string]any{"level": "ERROR", "msg": "protect: state file write failed; retrying", "file": path,
		"records": 4500.0, "error": "write " + path + ": no space left on device"}
	if !reflect.DeepEqual(line, wantLine) {
		t.Errorf("log line = %v\nwant %v", line, wantLine)
	}
	// The disk is still full: the open reads, and writes nothing.
	got, _ := restored(t, path, clk, 2000)
	if len(got) != 500 {
		t.Errorf("bans restored after Close on the full disk = %d, want 500 (those written before it filled)", len(got))
	}
}
