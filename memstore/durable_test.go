package memstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/logtest"
	"github.com/httpprotect/protect/store"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// BenchmarkRestoreBans measures OpenMemoryStore on a file of automatic
// bans and a full journal (100,000 events, the default JournalLength):
// PROTECT_RESTORE_BANS bans [100,000], so that a plain run of
// every benchmark stays short. The design's bar is 1M under a second:
//
//	PROTECT_RESTORE_BANS=1000000 go test -run '^$' -bench RestoreBans .
func BenchmarkRestoreBans(b *testing.B) {
	n := 100_000
	if v := os.Getenv("PROTECT_RESTORE_BANS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("PROTECT_RESTORE_BANS=%q: want a positive integer", v)
		}
	}
	path := filepath.Join(b.TempDir(), "protect.db")
	writeBans(b, path, n)

	// CPU time as well as wall time: on a busy machine the wall time
	// measures the neighbours too.
	var cpu time.Duration
	b.ResetTimer()
	for b.Loop() {
		before := cpuTime()
		s, err := OpenMemoryStore(MemoryOptions{Path: path, Logger: discardLogger(), SweepInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - before
		b.StopTimer()
		if got := len(s.byID); got != 1 {
			b.Fatalf("namespaces restored = %d, want 1", got)
		}
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(n), "bans")
	if fi, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(fi.Size())/float64(n), "file-B/ban")
	}
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeBans writes n automatic bans of an hour, from now, to a new state
// file at path, as a store would have written them, with the journal's
// events of the newest (as many as it keeps by default).
func writeBans(b *testing.B, path string, n int) {
	b.Helper()
	s, err := OpenMemoryStore(MemoryOptions{Path: path, Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	created := time.Now()
	ban := Ban{Reason: "stream passed the ban limit of 1000 requests", Source: SourceAuto, Created: created, Offense: 1}
	val := appendBanValue(nil, &ban, created.Add(time.Hour).UnixNano())
	const batch = 100_000
	for start := 0; start < n; start += batch {
		err := db.Update(func(tx *bolt.Tx) error {
			st := beginState(tx)
			bans := tx.Bucket(bucketBans)
			bans.FillPercent = 1 // keys come in order: pack the pages
			for i := start; i < min(start+batch, n); i++ {
				a := netip.AddrFrom4([4]byte{byte(11 + i>>24), byte(i >> 16), byte(i >> 8), byte(i)})
				if err := bans.Put(appendDiskKey(nil, "protect:", kindAddr, Key{Prefix: netip.PrefixFrom(a, 32)}), val); err != nil {
					return err
				}
				st.rec.bans++ // each key new
			}
			return st.finish()
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	// The journal's events of the newest bans, as many as it keeps.
	run := uint64(created.UnixNano())
	err = db.Update(func(tx *bolt.Tx) error {
		st := beginState(tx)
		events := tx.Bucket(bucketJournal)
		events.FillPercent = 1
		from := max(n-defaultJournalLength, 0)
		for i := from; i < n; i++ {
			a := netip.AddrFrom4([4]byte{byte(11 + i>>24), byte(i >> 16), byte(i >> 8), byte(i)})
			ban.Key = Key{Prefix: netip.PrefixFrom(a, 32)}
			v := appendEventValue(nil, store.EventBan, created.UnixNano(), run, &ban, created.Add(time.Hour).UnixNano())
			if err := events.Put(appendJournalKey(nil, "protect:", run+uint64(i-from)), v); err != nil {
				return err
			}
			st.rec.events++
		}
		return st.finish()
	})
	if err != nil {
		b.Fatal(err)
	}
}

// jsonLog keeps a store's log as JSON lines, so that a test can check a
// line's level, message and every attribute.
type jsonLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *jsonLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *jsonLog) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == "took" {
			return slog.Attr{}
		}
		return a
	}}))
}

// lines returns the lines of message msg, each as its fields.
func (l *jsonLog) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(l.buf.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// only returns the one line of message msg.
func (l *jsonLog) only(t *testing.T, msg string) map[string]any {
	t.Helper()
	got := l.lines(t, msg)
	if len(got) != 1 {
		t.Fatalf("log lines %q = %d, want 1; log:\n%s", msg, len(got), l.buf.String())
	}
	return got[0]
}

// banAddr is the i-th address the damage tests ban.
func banAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
}

// banRange opens path, bans banAddr(from) to banAddr(to-1) for a day
// and writes them in one transaction, then closes the store.
func banRange(t *testing.T, path string, clk *fakeClock, from, to int) {
	t.Helper()
	s := openDurable(t, path, clk, nil)
	sp, err := s.Space(Scope{Namespace: "protect:", Limits: Limits{TTL: time.Minute, BanLimit: -1, BanFactor: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// The writer is stopped while the bans are added, so that they go
	// in one transaction (Close's) whatever its timing.
	pauseWriter(s)
	for i := from; i < to; i++ {
		b := Ban{Key: Key{Prefix: netip.PrefixFrom(banAddr(i), 32)}, Source: SourceManual, Reason: "abuse", By: "ops"}
		if _, err := sp.AddBan(context.Background(), b, 24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
}

// pauseWriter stops s's writer goroutine, so that the test takes the
// writer's steps (flush) itself; Close still writes what is left.
func pauseWriter(s *MemoryStore) {
	j := s.journal
	close(j.stop)
	<-j.done
	j.stop = make(chan struct{})
}

// restored opens path and returns the addresses banned, the log and the
// store (closed in t.Cleanup).
func restored(t *testing.T, path string, clk *fakeClock, n int) (map[int]bool, *jsonLog) {
	t.Helper()
	var log jsonLog
	s := openDurable(t, path, clk, log.logger())
	sp, err := s.Space(Scope{Namespace: "protect:", Limits: Limits{TTL: time.Minute, BanLimit: -1, BanFactor: 1}})
	if err != nil {
		t.Fatal(err)
	}
	bans, err := sp.Bans(context.Background(), BanFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]bool{}
	for _, b := range bans {
		a := b.Key.Prefix.Addr().As4()
		got[int(a[1])<<16|int(a[2])<<8|int(a[3])] = true
	}
	return got, &log
}

// fileMeta reads path's page size and newest transaction with bbolt.
func fileMeta(t *testing.T, path string) (pageSize int, txid uint64) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error { txid = uint64(tx.ID()); return nil })
	return db.Info().PageSize, txid
}

// bansLeaf reports whether leaf page id of path holds ban records (its
// first key one of an address), not journal events.
func bansLeaf(t *testing.T, path string, id int) bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	psize, _ := fileMeta(t, path)
	_, k, _ := leafElem(data[id*psize:(id+1)*psize], 0)
	dk, err := decodeDiskKey(k, nil)
	return err == nil && dk.kind == kindAddr
}

// overwrite writes 4 KB... of seeded random bytes over page id of path.
func overwrite(t *testing.T, path string, id int64, size int, seed uint64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	if _, err := f.WriteAt(b, id*int64(size)); err != nil {
		t.Fatal(err)
	}
}

const damagedMsg = "protect: state file damaged: moved aside, what could be read restored"

// wantDamaged checks the one error line of a damaged file (lost -1:
// not known; eventsLost, the journal's), and that
// the file moved aside is the damaged one, byte for byte.
func wantDamaged(t *testing.T, log *jsonLog, path string, damaged []byte, damage string, bans, lost, eventsLost int) {
	t.Helper()
	line := log.only(t, damagedMsg)
	moved, _ := line["moved_to"].(string)
	want := map[string]any{"level": "ERROR", "msg": damagedMsg, "file": path, "moved_to": moved, "damage": damage,
		"bans": float64(bans), "offenses": 0.0, "plans": 0.0}
	if lost >= 0 { // else the file's record of itself is lost too
		want["bans_lost"], want["offenses_lost"], want["plans_lost"] = float64(lost), 0.0, 0.0
		want["journal_lost"], want["bookmarks_lost"] = float64(eventsLost), 0.0
	}
	if !reflect.DeepEqual(line, want) {
		t.Errorf("log line = %v\nwant %v", line, want)
	}
	if got, err := os.ReadFile(moved); err != nil || !bytes.Equal(got, damaged) {
		t.Errorf("the file moved aside, %s = %d bytes (%v), want the %d bytes of the damaged file", moved, len(got), err, len(damaged))
	}
	if wantName := path + ".damaged-20261129T120000Z"; moved != wantName {
		t.Errorf("moved_to = %s, want %s (the time of the open)", moved, wantName)
	}
}

// A damaged state file is moved aside, what its intact pages hold is
// restored, one error line names both files and what was lost, and the
// store starts: never a panic. Each damage is deterministic (seeded
// bytes, a page found from the file's own page size).
func TestStateFileDamage(t *testing.T) {
	t.Run("random data page", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "protect.db")
		clk := newFakeClock()
		banRange(t, path, clk, 0, 2000)
		// The leaf of the bans bucket highest in the file, as bbolt
		// reports it, and the bans it holds.
		psize, _ := fileMeta(t, path)
		var leaf, held int
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
		if err != nil {
			t.Fatal(err)
		}
		db.View(func(tx *bolt.Tx) error {
			for id := 2; ; id++ {
				p, err := tx.Page(id)
				if err != nil || p == nil {
					return nil
				}
				if p.Type == "leaf" && p.Count > 6 && bansLeaf(t, path, id) { // the root's leaf holds the 6 buckets
					leaf, held = id, p.Count
				}
			}
		})
		db.Close()
		if held == 0 {
			t.Fatal("no leaf of bans in the file")
		}
		overwrite(t, path, int64(leaf), psize, 1)
		damaged, _ := os.ReadFile(path)
		got, log := restored(t, path, clk, 2000)
		t.Logf("page %d of %d bytes overwritten: %d of 2000 bans restored", leaf, psize, len(got))
		if len(got) != 2000-held {
			t.Errorf("bans restored = %d, want %d: all but the %d of page %d", len(got), 2000-held, held, leaf)
		}
		wantDamaged(t, log, path, damaged, fmt.Sprintf("page %d: identifies as %d", leaf, ne.Uint64(damaged[leaf*psize:])), 2000-held, held, 0)
	})
	t.Run("truncated to half", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "protect.db")
		clk := newFakeClock()
		banRange(t, path, clk, 0, 2000)
		fi, _ := os.Stat(path)
		if err := os.Truncate(path, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
		damaged, _ := os.ReadFile(path)
		// bbolt writes a transaction's pages in order, the root bucket's
		// last: it is past the cut, and with it the way to every bucket.
		psize, txid := fileMeta(t, path)
		m, _ := parseMeta(damaged[int(txid%2)*psize:])
		got, log := restored(t, path, clk, 2000)
		if len(got) != 0 {
			t.Errorf("bans restored = %d, want 0: the root page is past the cut", len(got))
		}
		wantDamaged(t, log, path, damaged, fmt.Sprintf("page %d: past the end of the file (%d bytes)", m.root, len(damaged)), 0, -1, -1)
	})
	t.Run("random newest meta page", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "protect.db")
		clk := newFakeClock()
		banRange(t, path, clk, 0, 98)
		banRange(t, path, clk, 98, 200)
		psize, txid := fileMeta(t, path)
		overwrite(t, path, int64(txid%2), psize, 2)
		damaged, _ := os.ReadFile(path)
		got, log := restored(t, path, clk, 200)
		if len(got) != 98 {
			t.Errorf("bans restored = %d, want 98 (the older meta page's)", len(got))
		}
		for i := range 98 {
			if !got[i] {
				t.Errorf("ban %d of the first transaction not restored", i)
			}
		}
		wantDamaged(t, log, path, damaged, fmt.Sprintf("meta page %d not valid, transaction %d read from meta page %d; transaction %d lost", txid%2, txid-1, 1-txid%2, txid), 98, 102, 102)
	})
	t.Run("zero length", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "protect.db")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		got, log := restored(t, path, newFakeClock(), 0)
		if len(got) != 0 {
			t.Errorf("bans restored from an empty file = %d, want 0", len(got))
		}
		line := log.only(t, "protect: state file empty: nothing restored")
		if want := map[string]any{"level": "ERROR", "msg": "protect: state file empty: nothing restored", "file": path}; !reflect.DeepEqual(line, want) {
			t.Errorf("log line = %v, want %v", line, want)
		}
	})
}

// Close returns a write that fails at close, wrapped, naming the file
// and what it did not write: here the file is closed under the writer.
func TestStateFileCloseReportsFailedWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "protect.db")
	s, err := OpenMemoryStore(MemoryOptions{Path: path, Logger: discardLogger(), SweepInterval: -1, Clock: newFakeClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	pauseWriter(s)
	s.journal.db.Close() // every write fails from here on
	sp, err := s.Space(Scope{Namespace: "n", Limits: Limits{TTL: time.Minute, BanLimit: -1, BanFactor: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.AddBan(context.Background(), Ban{Key: Key{Prefix: netip.MustParsePrefix("192.0.2.1/32")}, Source: SourceManual}, time.Hour); err != nil {
		t.Fatal(err)
	}
	err = s.Close()
	// A ban record, an offense record and the ban's event.
	want := fmt.Sprintf("protect: state file %s: 3 records not written at close: database not open", path)
	if err == nil || err.Error() != want || !errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		t.Errorf("Close() = %v, want %q", err, want)
	}
}

// A state file's record decoder never panics nor reads past a record, and
// what it decodes it writes back to the same thing: a malformed record is
// that record's error alone.
func FuzzStateRecord(f *testing.F) {
	created := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ban := Ban{Reason: "stream passed the ban limit of 1000 requests", Source: SourceAuto, Created: created, Offense: 2}
	manual := Ban{Reason: "abuse", Source: SourceManual, By: "ops", Created: created}
	for _, seed := range []struct{ key, val []byte }{
		{appendDiskKey(nil, "protect:", kindAddr, Key{Prefix: netip.MustParsePrefix("203.0.113.7/32")}), appendBanValue(nil, &ban, created.Add(time.Hour).UnixNano())},
		{appendDiskKey(nil, "protect:", kindRange, Key{Prefix: netip.MustParsePrefix("2001:db8::/48")}), appendBanValue(nil, &manual, 0)},
		{appendDiskKey(nil, "api:", kindName, Key{Name: "cus_alpha"}), appendOffenseValue(nil, []int64{1, 2, 3}, 4)},
		{appendDiskKey(nil, "", kindName, Key{Name: "acme"}), appendPlanValue(nil, 99, []planSlot{{name: "monthly", quota: Monthly, a: 40, b: 99}, {name: "rate", a: 5, b: 1}})},
		{[]byte{0xff, 0xff}, []byte{recordVersion, 200}},
		{appendJournalKey(nil, "protect:", 1<<60), appendEventValue(nil, store.EventLift, created.UnixNano(), 1<<60, &Ban{Key: Key{Prefix: netip.MustParsePrefix("203.0.113.7/32")}, Reason: "r", Source: SourceManual}, created.Add(time.Hour).UnixNano())},
		{appendJournalKey(nil, "api:", 7), appendEventValue(nil, store.EventAllow, 1, 7, &Ban{Key: Key{Prefix: netip.MustParsePrefix("2001:db8::/48")}, Range: true}, 0)},
		{appendMarkKey(nil, "protect:", "lapi:key"), appendEventValue(nil, store.EventBan, 1, 7, &Ban{Key: Key{Name: "cus_alpha"}}, 0)},
		{appendMarkKey(nil, "protect:", "lapi:key"), appendMarkValue(nil, `{"acked":"12"}`, created.UnixNano())},
	} {
		f.Add(seed.key, seed.val)
	}
	f.Fuzz(func(t *testing.T, key, val []byte) {
		if dk, err := decodeDiskKey(key, nil); err == nil {
			again, err := decodeDiskKey(appendDiskKey(nil, dk.ns, dk.kind, dk.key), nil)
			if err != nil || again != dk {
				t.Fatalf("decodeDiskKey(appendDiskKey(%+v)) = %+v, %v; want it back", dk, again, err)
			}
		}
		if d, err := decodeBanValue(val, nil); err == nil {
			b := Ban{Reason: d.reason, Source: d.source, By: d.by, Created: time.Unix(0, d.created), Offense: d.offense}
			again, err := decodeBanValue(appendBanValue(nil, &b, d.end), nil)
			if err != nil || again != d {
				t.Fatalf("decodeBanValue(appendBanValue(%+v)) = %+v, %v; want it back", d, again, err)
			}
		}
		if times, exp, err := decodeOffenseValue(val); err == nil {
			t2, e2, err := decodeOffenseValue(appendOffenseValue(nil, times, exp))
			if err != nil || e2 != exp || !reflect.DeepEqual(t2, times) {
				t.Fatalf("decodeOffenseValue(appendOffenseValue(%v, %d)) = %v, %d, %v; want them back", times, exp, t2, e2, err)
			}
		}
		if ns, seq, err := decodeJournalKey(key, nil); err == nil {
			n2, s2, err := decodeJournalKey(appendJournalKey(nil, ns, seq), nil)
			if err != nil || n2 != ns || s2 != seq {
				t.Fatalf("decodeJournalKey(appendJournalKey(%q, %d)) = %q, %d, %v; want them back", ns, seq, n2, s2, err)
			}
		}
		if d, err := decodeEventValue(val, nil); err == nil {
			b := Ban{Key: d.key, Range: d.rng, Reason: d.ban.reason, Source: d.ban.source, By: d.ban.by, Created: time.Unix(0, d.ban.created), Offense: d.ban.offense}
			again, err := decodeEventValue(appendEventValue(nil, d.kind, d.t, d.run, &b, d.ban.end), nil)
			if err != nil || again != d {
				t.Fatalf("decodeEventValue(appendEventValue(%+v)) = %+v, %v; want it back", d, again, err)
			}
		}
		if ns, name, err := decodeMarkKey(key, nil); err == nil {
			n2, m2, err := decodeMarkKey(appendMarkKey(nil, ns, name), nil)
			if err != nil || n2 != ns || m2 != name {
				t.Fatalf("decodeMarkKey(appendMarkKey(%q, %q)) = %q, %q, %v; want them back", ns, name, n2, m2, err)
			}
		}
		if text, exp, err := decodeMarkValue(val); err == nil {
			t2, e2, err := decodeMarkValue(appendMarkValue(nil, text, exp))
			if err != nil || t2 != text || e2 != exp {
				t.Fatalf("decodeMarkValue(appendMarkValue(%q, %d)) = %q, %d, %v; want them back", text, exp, t2, e2, err)
			}
		}
		if exp, slots, err := decodePlanValue(val); err == nil {
			e2, s2, err := decodePlanValue(appendPlanValue(nil, exp, slots))
			if err != nil || e2 != exp || !reflect.DeepEqual(s2, slots) {
				t.Fatalf("decodePlanValue(appendPlanValue(%d, %v)) = %d, %v, %v; want them back", exp, slots, e2, s2, err)
			}
		}
	})
}

// No state file panics the process: whatever its bytes, OpenMemoryStore
// returns a store or an error, and the check reads no byte past the file.
// The seeds are a file a store wrote and the damage of
// TestStateFileDamage done to it.
func FuzzStateFileOpen(f *testing.F) {
	path := filepath.Join(f.TempDir(), "seed.db")
	clk := newFakeClock()
	s, err := OpenMemoryStore(MemoryOptions{Path: path, Logger: discardLogger(), SweepInterval: -1, Clock: clk.Now})
	if err != nil {
		f.Fatal(err)
	}
	sp, err := s.Space(Scope{Namespace: "protect:", Limits: Limits{TTL: time.Minute, BanLimit: -1, BanFactor: 1}})
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	for i := range 60 {
		b := Ban{Key: Key{Prefix: netip.PrefixFrom(banAddr(i), 32)}, Source: SourceManual, Reason: "abuse"}
		if _, err := sp.AddBan(ctx, b, time.Hour); err != nil {
			f.Fatal(err)
		}
	}
	if _, err := sp.AddBan(ctx, Ban{Key: Key{Prefix: netip.MustParsePrefix("2001:db8::/48")}, Source: SourceManual}, 0); err != nil {
		f.Fatal(err)
	}
	if _, err := sp.TakePlan(ctx, Key{Name: "acme"}, banAddr(1), mustPlan(f, "p", Quota{Name: "q", Limit: 10, Period: Monthly}), 1, false); err != nil {
		f.Fatal(err)
	}
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte{})
	for _, page := range []int{0, 1, 2, 3, 4} {
		bad := bytes.Clone(good)
		r := rand.New(rand.NewPCG(uint64(page), 1))
		for i := page * 4096; i < (page+1)*4096 && i < len(bad); i++ {
			bad[i] = byte(r.Uint32())
		}
		f.Add(bad)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 0 {
			checkFile(data, true) // on the bytes alone
		}
		path := filepath.Join(t.TempDir(), "protect.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := OpenMemoryStore(MemoryOptions{Path: path, Logger: discardLogger(), SweepInterval: -1, Clock: clk.Now})
		if err != nil {
			return
		}
		sp, err := s.Space(Scope{Namespace: "protect:", Limits: Limits{TTL: time.Minute, BanLimit: -1, BanFactor: 1}})
		if err == nil {
			sp.Bans(ctx, BanFilter{})
		}
		s.Close()
	})
}

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
	// One plan record, one ban record and one offense record: the
	// journal's 100 events are read again from the journal by the next
	// write (TestStateFileJournalAfterFailedWrites), not kept.
	if n := len(j.pending); n != 3 {
		t.Errorf("after 100 failed flushes of one plan key and one ban the writer holds %d ops, want 3", n)
	}
}

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
