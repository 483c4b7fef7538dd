package memstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

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
// not known), and that
// the file moved aside is the damaged one, byte for byte.
func wantDamaged(t *testing.T, log *jsonLog, path string, damaged []byte, damage string, bans, lost int) {
	t.Helper()
	line := log.only(t, damagedMsg)
	moved, _ := line["moved_to"].(string)
	want := map[string]any{"level": "ERROR", "msg": damagedMsg, "file": path, "moved_to": moved, "damage": damage,
		"bans": float64(bans), "offenses": 0.0, "plans": 0.0}
	if lost >= 0 { // else the file's record of itself is lost too
		want["bans_lost"], want["offenses_lost"], want["plans_lost"] = float64(lost), 0.0, 0.0
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
				if p.Type == "leaf" && p.Count > 4 { // the root's leaf holds the 4 buckets
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
		wantDamaged(t, log, path, damaged, fmt.Sprintf("page %d: identifies as %d", leaf, ne.Uint64(damaged[leaf*psize:])), 2000-held, held)
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
		wantDamaged(t, log, path, damaged, fmt.Sprintf("page %d: past the end of the file (%d bytes)", m.root, len(damaged)), 0, -1)
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
		wantDamaged(t, log, path, damaged, fmt.Sprintf("meta page %d not valid, transaction %d read from meta page %d; transaction %d lost", txid%2, txid-1, 1-txid%2, txid), 98, 102)
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
	want := fmt.Sprintf("protect: state file %s: 2 records not written at close: database not open", path)
	if err == nil || err.Error() != want || !errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		t.Errorf("Close() = %v, want %q", err, want)
	}
}
