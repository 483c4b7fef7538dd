package memstore

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkRestoreBans measures OpenMemoryStore on a file of automatic
// bans: PROTECT_RESTORE_BANS of them [100,000], so that a plain run of
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
// file at path, as a store would have written them.
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
}
