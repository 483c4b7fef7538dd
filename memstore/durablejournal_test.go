package memstore

import (
	"errors"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/httpprotect/protect/internal/logtest"
	"github.com/httpprotect/protect/store"
)

// journalOpen opens path with a journal of length events at most, on
// clk, closed in t.Cleanup.
func journalOpen(t *testing.T, path string, clk *fakeClock, length int, log *slog.Logger) *MemoryStore {
	t.Helper()
	if log == nil {
		log = discardLogger()
	}
	s, err := OpenMemoryStore(MemoryOptions{Path: path, Logger: log, SweepInterval: -1, Clock: clk.Now, JournalLength: length})
	if err != nil {
		t.Fatalf("OpenMemoryStore(%s) = %v, want a store", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// cursors formats evs as cursor:kind@key.
func cursors(evs []store.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Cursor+":"+e.Kind.String()+"@"+e.Ban.Key.String())
	}
	return out
}

// seqCursor is sequence number n as a cursor.
func seqCursor(n uint64) string { return strconv.FormatUint(n, 10) }

func banKey(t *testing.T, sp Space, s string) {
	t.Helper()
	if _, err := sp.AddBan(t.Context(), Ban{Key: hostKey(s), Source: SourceManual, Reason: "abuse", By: "ops"}, time.Hour); err != nil {
		t.Fatalf("AddBan(%s) = %v", s, err)
	}
}

func liftKey(t *testing.T, sp Space, s string) {
	t.Helper()
	if _, ok, err := sp.Lift(t.Context(), hostKey(s)); !ok || err != nil {
		t.Fatalf("Lift(%s) = %v, %v; want true, nil", s, ok, err)
	}
}

// A journal written to a state file reads on after a restart: the
// events are there, numbered as they were, a cursor of the run before
// reads the events after it, this run numbers its events past them,
// and a cursor of an event the file never held (lost between runs)
// reads as gone. A second restart keeps both runs.
func TestStateFileKeepsJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "protect.db")
	clk := newFakeClock()
	run1 := uint64(clk.Now().UnixNano())
	s := journalOpen(t, path, clk, 0, nil)
	sp := durableSpace(t, s)
	banKey(t, sp, "192.0.2.1")
	banKey(t, sp, "192.0.2.2")
	liftKey(t, sp, "192.0.2.1")
	s.Close()

	clk.Advance(time.Minute)
	s = journalOpen(t, path, clk, 0, nil)
	sp = durableSpace(t, s)
	run2 := uint64(clk.Now().UnixNano())
	want := []string{seqCursor(run1) + ":ban@192.0.2.1", seqCursor(run1+1) + ":ban@192.0.2.2", seqCursor(run1+2) + ":lift@192.0.2.1"}
	if got := cursors(events(t, sp, "")); !slices.Equal(got, want) {
		t.Fatalf("Events(\"\") after a restart = %q, want %q", got, want)
	}
	if got := cursors(events(t, sp, seqCursor(run1))); !slices.Equal(got, want[1:]) {
		t.Errorf("Events(%d) after a restart = %q, want %q", run1, got, want[1:])
	}
	liftKey(t, sp, "192.0.2.2")
	want = append(want, seqCursor(run2)+":lift@192.0.2.2")
	if got := cursors(events(t, sp, seqCursor(run1+2))); !slices.Equal(got, want[3:]) {
		t.Errorf("Events(%d), the last of the run before = %q, want %q", run1+2, got, want[3:])
	}
	for _, lost := range []uint64{run1 + 3, run2 - 1} {
		if _, err := sp.(store.Journal).Events(t.Context(), seqCursor(lost), 10); !errors.Is(err, store.ErrCursorGone) {
			t.Errorf("Events(%d), an event the file never held = %v, want ErrCursorGone", lost, err)
		}
	}
	s.Close()

	clk.Advance(time.Minute)
	s = journalOpen(t, path, clk, 0, nil)
	sp = durableSpace(t, s)
	if got := cursors(events(t, sp, "")); !slices.Equal(got, want) {
		t.Errorf("Events(\"\") after a second restart = %q, want %q", got, want)
	}
	if got := cursors(events(t, sp, seqCursor(run1+1))); !slices.Equal(got, want[2:]) {
		t.Errorf("Events(%d) after a second restart = %q, want %q", run1+1, got, want[2:])
	}
	if n := countRecordsOpen(t, s, bucketJournal); n != 4 {
		t.Errorf("journal records = %d, want 4", n)
	}
}

// A restart on a clock stepped back numbers its events past the
// restored ones all the same, by runGap: a cursor of the run before
// never names an event of this one.
func TestStateFileJournalClockBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "protect.db")
	clk := newFakeClock()
	run1 := uint64(clk.Now().UnixNano())
	s := journalOpen(t, path, clk, 0, nil)
	banKey(t, durableSpace(t, s), "192.0.2.1")
	s.Close()

	clk.Advance(-time.Hour)
	s = journalOpen(t, path, clk, 0, nil)
	sp := durableSpace(t, s)
	liftKey(t, sp, "192.0.2.1")
	want := []string{seqCursor(run1) + ":ban@192.0.2.1", seqCursor(run1+runGap) + ":lift@192.0.2.1"}
	if got := cursors(events(t, sp, "")); !slices.Equal(got, want) {
		t.Errorf("Events(\"\") after a restart an hour back = %q, want %q", got, want)
	}
}

// countRecordsOpen closes s and counts the records of bucket in its
// file.
func countRecordsOpen(t *testing.T, s *MemoryStore, bucket []byte) int {
	t.Helper()
	path := s.journal.path
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	return countRecords(t, path, bucket)
}

// The journal's events written while the state file could not be
// written (a full disk) reach it with the first write that succeeds:
// the writer reads them again from the journal, which holds at most
// JournalLength of them, and deletes what was trimmed meanwhile.
func TestStateFileJournalAfterFailedWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "protect.db")
	clk := newFakeClock()
	s := journalOpen(t, path, clk, 10, nil)
	j := s.journal
	// Stop the writer: the test flushes by hand, as the writer would.
	close(j.stop)
	<-j.done
	sp := durableSpace(t, s)
	for i := range 3 {
		banKey(t, sp, "192.0.2."+strconv.Itoa(i+1))
	}
	if err := j.flush(true); err != nil {
		t.Fatalf("flush = %v", err)
	}
	j.db.Close() // every write fails from here on
	for i := range 20 {
		banKey(t, sp, "198.51.100."+strconv.Itoa(i+1))
		if j.flush(true) == nil {
			t.Fatalf("flush %d to a closed file succeeded", i)
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	j.db = db // the disk has room again
	if err := j.flush(true); err != nil {
		t.Fatalf("flush once the file can be written = %v", err)
	}
	want := cursors(events(t, sp, ""))
	if len(want) != 10 {
		t.Fatalf("the journal holds %d events, want 10 (JournalLength)", len(want))
	}
	db.Close()
	j.closeOnce.Do(func() {}) // closed by hand
	s.Close()

	s = journalOpen(t, path, clk, 10, nil)
	if got := cursors(events(t, durableSpace(t, s), "")); !slices.Equal(got, want) {
		t.Errorf("Events(\"\") after a restart = %q, want the journal before it, %q", got, want)
	}
	if n := countRecordsOpen(t, s, bucketJournal); n != 10 {
		t.Errorf("journal records = %d, want 10", n)
	}
}

// The journal is bounded on disk as in memory: the file holds the
// events the ring holds, and a restart with a shorter
// Options.JournalLength keeps the newest, deleting the rest.
func TestStateFileTrimsJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "protect.db")
	clk := newFakeClock()
	run1 := uint64(clk.Now().UnixNano())
	s := journalOpen(t, path, clk, 3, nil)
	sp := durableSpace(t, s)
	for i := 1; i <= 5; i++ {
		banKey(t, sp, "192.0.2."+strconv.Itoa(i))
		if err := s.journal.sync(); err != nil {
			t.Fatal(err)
		}
	}
	if n := countRecordsOpen(t, s, bucketJournal); n != 3 {
		t.Errorf("journal records of a ring of 3 after 5 events = %d, want 3", n)
	}

	s = journalOpen(t, path, clk, 2, nil)
	sp = durableSpace(t, s)
	want := []string{seqCursor(run1+3) + ":ban@192.0.2.4", seqCursor(run1+4) + ":ban@192.0.2.5"}
	if got := cursors(events(t, sp, "")); !slices.Equal(got, want) {
		t.Errorf("Events(\"\") after a restart with JournalLength 2 = %q, want %q", got, want)
	}
	if _, err := sp.(store.Journal).Events(t.Context(), seqCursor(run1+1), 10); !errors.Is(err, store.ErrCursorGone) {
		t.Errorf("Events(%d), before the oldest kept = %v, want ErrCursorGone", run1+1, err)
	}
	if err := s.journal.sync(); err != nil {
		t.Fatal(err)
	}
	if n := countRecordsOpen(t, s, bucketJournal); n != 2 {
		t.Errorf("journal records after a restart with JournalLength 2 = %d, want 2", n)
	}
}

// Bookmarks keep their text and their expiry across a restart: one
// whose ttl ran out while the file was closed is gone, and its record
// deleted.
func TestStateFileKeepsBookmarks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "protect.db")
	clk := newFakeClock()
	s := journalOpen(t, path, clk, 0, nil)
	bm := durableSpace(t, s).(store.Bookmarks)
	ctx := t.Context()
	for _, m := range []struct {
		name, text string
		ttl        time.Duration
	}{{"short", "1", time.Minute}, {"long", "2", time.Hour}, {"moved", "3", time.Hour}} {
		if err := bm.SetBookmark(ctx, m.name, m.text, m.ttl); err != nil {
			t.Fatal(err)
		}
	}
	if err := bm.SetBookmark(ctx, "moved", "4", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	s.Close()

	clk.Advance(2 * time.Minute)
	s = journalOpen(t, path, clk, 0, nil)
	bm = durableSpace(t, s).(store.Bookmarks)
	for _, c := range []struct {
		name, text string
		ok         bool
	}{{"short", "", false}, {"long", "2", true}, {"moved", "4", true}} {
		if text, ok, err := bm.Bookmark(ctx, c.name); text != c.text || ok != c.ok || err != nil {
			t.Errorf("Bookmark(%q) after a restart = %q, %v, %v; want %q, %v, nil", c.name, text, ok, err, c.text, c.ok)
		}
	}
	clk.Advance(9 * time.Minute) // past "moved"'s 10 minutes, set 11 minutes ago
	if text, ok, err := bm.Bookmark(ctx, "moved"); ok || err != nil {
		t.Errorf("Bookmark(moved) past its ttl = %q, %v, %v; want \"\", false, nil", text, ok, err)
	}
	if n := countRecordsOpen(t, s, bucketMarks); n != 2 {
		t.Errorf("bookmark records after the restart = %d, want 2 (the expired one deleted)", n)
	}
}

// A damaged journal or bookmark record is skipped and logged; the rest
// is restored. A reader placed before a damaged event is told its
// events are gone, not led past it.
func TestStateFileSkipsDamagedJournalRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "protect.db")
	clk := newFakeClock()
	run1 := uint64(clk.Now().UnixNano())
	s := journalOpen(t, path, clk, 0, nil)
	sp := durableSpace(t, s)
	for i := 1; i <= 4; i++ {
		banKey(t, sp, "192.0.2."+strconv.Itoa(i))
	}
	if err := sp.(store.Bookmarks).SetBookmark(t.Context(), "good", "g", time.Hour); err != nil {
		t.Fatal(err)
	}
	s.Close()

	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		j := tx.Bucket(bucketJournal)
		m := tx.Bucket(bucketMarks)
		for _, e := range []error{
			j.Put(appendJournalKey(nil, "protect:", run1+1), []byte{recordVersion, 99}), // event 2: a kind of no event
			j.Put([]byte("\xff\xff garbage key"), []byte{recordVersion}),
			m.Put(appendMarkKey(nil, "protect:", "bad"), []byte{recordVersion, 200}), // text past the end
		} {
			if e != nil {
				return e
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	var rec logtest.Recorder
	s = journalOpen(t, path, clk, 0, slog.New(&rec))
	sp = durableSpace(t, s)
	want := []string{seqCursor(run1+2) + ":ban@192.0.2.3", seqCursor(run1+3) + ":ban@192.0.2.4"}
	if got := cursors(events(t, sp, "")); !slices.Equal(got, want) {
		t.Errorf("Events(\"\") past a damaged event = %q, want %q", got, want)
	}
	if _, err := sp.(store.Journal).Events(t.Context(), seqCursor(run1), 10); !errors.Is(err, store.ErrCursorGone) {
		t.Errorf("Events(%d), before the damaged event = %v, want ErrCursorGone", run1, err)
	}
	if got := cursors(events(t, sp, seqCursor(run1+2))); !slices.Equal(got, want[1:]) {
		t.Errorf("Events(%d), after the damaged event = %q, want %q", run1+2, got, want[1:])
	}
	bm := sp.(store.Bookmarks)
	if text, ok, err := bm.Bookmark(t.Context(), "good"); text != "g" || !ok || err != nil {
		t.Errorf("Bookmark(good) beside a damaged one = %q, %v, %v; want \"g\", true, nil", text, ok, err)
	}
	if text, ok, err := bm.Bookmark(t.Context(), "bad"); ok || err != nil {
		t.Errorf("Bookmark(bad), damaged = %q, %v, %v; want \"\", false, nil", text, ok, err)
	}
	if n := rec.Count("protect: state file record skipped"); n != 3 {
		t.Errorf("records skipped logged = %d, want 3", n)
	}
	// The events before the damaged one, and it, are deleted with the
	// next write; the garbage key is left, and skipped again.
	if err := s.journal.sync(); err != nil {
		t.Fatal(err)
	}
	if n := countRecordsOpen(t, s, bucketJournal); n != 3 {
		t.Errorf("journal records after the restore = %d, want 3 (2 events and the garbage key)", n)
	}
}

// crashJournalEnv names the state file a child of
// TestStateFileKeepsJournalAfterKill writes before it is killed.
const crashJournalEnv = "PROTECT_TEST_JOURNAL_CRASH_FILE"

// The journal and a bookmark a store wrote are there after the process
// is killed (SIGKILL, no Close): a reader's bookmark from before reads
// on to the lift made after it.
func TestStateFileKeepsJournalAfterKill(t *testing.T) {
	sp := crashed(t, "TestStateFileKeepsJournalAfterKill", crashJournalEnv, journalThenWait)
	if sp == nil {
		return // the child
	}
	place, ok, err := sp.(store.Bookmarks).Bookmark(t.Context(), "reader")
	if !ok || err != nil {
		t.Fatalf("Bookmark(reader) after SIGKILL = %q, %v, %v; want it kept", place, ok, err)
	}
	evs, err := sp.(store.Journal).Events(t.Context(), place, 10)
	if got, want := kinds(evs), "lift@192.0.2.7"; err != nil || got != want {
		t.Errorf("Events(the bookmark) after SIGKILL = %q, %v; want %q", got, err, want)
	}
}

// journalThenWait is the child: it bans, bookmarks the reader's place
// after the ban, and lifts.
func journalThenWait(t *testing.T, sp Space) {
	k := store.Key{Prefix: netip.MustParsePrefix("192.0.2.7/32")}
	if _, err := sp.AddBan(t.Context(), store.Ban{Key: k, Source: store.SourceManual}, time.Hour); err != nil {
		t.Fatal(err)
	}
	evs, err := sp.(store.Journal).Events(t.Context(), "", 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("Events = %v, %v; want the ban", evs, err)
	}
	if err := sp.(store.Bookmarks).SetBookmark(t.Context(), "reader", evs[0].Cursor, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := sp.Lift(t.Context(), k); !ok || err != nil {
		t.Fatalf("Lift = %v, %v", ok, err)
	}
}

// A journal restored from a state file is a span of events for each run
// that wrote them, then this run's: a cursor reads on across spans from
// the last event of one to the first of the next, and one between them
// (an event the file lost) or before the oldest reads as gone.
func TestJournalSpans(t *testing.T) {
	const run = 201 + runGap // this run's first event
	for _, tc := range []struct {
		name   string
		length int // JournalLength
		since  string
		want   []uint64
		err    error
	}{
		{"from the oldest", 10, "", []uint64{100, 101, 102, 200, 201, run, run + 1}, nil},
		{"the one before the oldest", 10, "99", []uint64{100, 101, 102, 200, 201, run, run + 1}, nil},
		{"within a span", 10, "100", []uint64{101, 102, 200, 201, run, run + 1}, nil},
		{"the last of a span", 10, "102", []uint64{200, 201, run, run + 1}, nil},
		{"the last restored", 10, "201", []uint64{run, run + 1}, nil},
		{"this run's", 10, seqCursor(run), []uint64{run + 1}, nil},
		{"the newest", 10, seqCursor(run + 1), nil, nil},
		{"before the oldest", 10, "98", nil, store.ErrCursorGone},
		{"lost after a span", 10, "103", nil, store.ErrCursorGone},
		{"lost before a span", 10, "199", nil, store.ErrCursorGone},
		{"before this run's first", 10, seqCursor(run - 1), nil, store.ErrCursorGone},
		{"past the newest", 10, seqCursor(run + 2), nil, store.ErrBadCursor},
		{"trimmed by length", 5, "", []uint64{102, 200, 201, run, run + 1}, nil},
		{"trimmed, the one before the oldest", 5, "101", []uint64{102, 200, 201, run, run + 1}, nil},
		{"trimmed away", 5, "100", nil, store.ErrCursorGone},
		{"a span trimmed whole", 3, "201", []uint64{run, run + 1}, nil},
		{"a span trimmed whole, its last", 3, "102", nil, store.ErrCursorGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newEventLog(tc.length, time.Hour, 1000)
			for _, seq := range []uint64{100, 101, 102, 200, 201} {
				l.restoreEntry(seq, logEntry{b: &heldBan{}, kind: store.EventBan})
				l.high = seq
			}
			l.resume()
			l.add(store.EventLift, &heldBan{}, 0)
			l.add(store.EventLift, &heldBan{}, 0)
			evs, err := l.read(tc.since, 100, 0, func(seq uint64, _ *logEntry) store.Event {
				return store.Event{Cursor: seqCursor(seq)}
			})
			var got []uint64
			for _, e := range evs {
				n, _ := strconv.ParseUint(e.Cursor, 10, 64)
				got = append(got, n)
			}
			if !slices.Equal(got, tc.want) || !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Errorf("read(%q) = %v, %v; want %v, %v", tc.since, got, err, tc.want, tc.err)
			}
		})
	}
}
