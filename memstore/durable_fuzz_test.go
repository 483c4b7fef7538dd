package memstore

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

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
