package admin

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
)

// records decodes data into ban records as stores and servers can hand
// them over, 4 bytes a record: damaged records (Malformed, no times),
// permanent bans, zero times, empty keys, and records whose fields
// disagree (not permanent, yet no expiry), converted by Record or taken
// as they are.
func records(data []byte, now time.Time) []BanRecord {
	keys := []string{"", "192.0.2.1", "198.18.0.0/16", "consumer:x", "::1"}
	var out []BanRecord
	for ; len(data) >= 4; data = data[4:] {
		flags, exp, key, ns := data[0], data[1], data[2], data[3]
		k, _ := protect.ParseKey(keys[int(key)%len(keys)])
		b := protect.Ban{Key: k, Range: flags&1 != 0, Source: protect.SourceAuto}
		if flags&2 == 0 {
			b.Expires = now.Add(time.Duration(int(exp)-128) * time.Minute)
			b.Created = now.Add(-time.Hour)
		}
		if flags&4 != 0 {
			b = protect.Ban{Key: k, Range: b.Range, Malformed: "not a ban record"}
		}
		r := Record(b, now)
		if flags&8 != 0 { // as a server might send it: fields that disagree
			r = BanRecord{Key: keys[int(key)%len(keys)], Permanent: flags&16 != 0, Malformed: map[bool]string{true: "x"}[flags&32 != 0]}
			if flags&64 != 0 {
				t := now.Add(time.Duration(exp) * time.Second)
				r.Expires = &t
			}
		}
		r.BanNamespace = []string{"", "a:", "b:"}[int(ns)%3]
		out = append(out, r)
	}
	return out
}

// seedSorts are listings that panicked in sortRecords: a damaged key
// record beside a temporary ban, two damaged records, a damaged range
// beside a permanent ban and a temporary one.
var seedSorts = [][]byte{
	{4, 0, 1, 0, 0, 10, 2, 0},
	{4, 0, 1, 0, 5, 0, 2, 0},
	{5, 0, 2, 1, 2, 0, 3, 1, 0, 200, 1, 2},
	{8, 0, 0, 0, 0, 0, 1, 0},
}

// Whatever records a store returns, the listing orders them without a
// panic: every record once, those that expire first and soonest first,
// then the rest (permanent, damaged) by list and key.
func FuzzSortRecords(f *testing.F) {
	for _, s := range seedSorts {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		rs := records(data, now)
		got := slices.Clone(rs)
		sortRecords(got)
		if len(got) != len(rs) {
			t.Fatalf("sortRecords(%d records) = %d records", len(rs), len(got))
		}
		rest := false
		for i, r := range got {
			e := ends(r)
			if e == nil {
				rest = true
			} else if rest {
				t.Fatalf("sortRecords: record %d %+v expires after one that does not", i, r)
			}
			if i == 0 {
				continue
			}
			p := got[i-1]
			pe := ends(p)
			switch {
			case pe != nil && e != nil && pe.After(*e):
				t.Fatalf("sortRecords: record %d expires at %v, before record %d at %v", i, e, i-1, pe)
			case (pe == nil) == (e == nil) && (pe == nil || pe.Equal(*e)) &&
				strings.Compare(p.BanNamespace+"\x00"+p.Key, r.BanNamespace+"\x00"+r.Key) > 0:
				t.Fatalf("sortRecords: record %d %q before %q", i, p.Key, r.Key)
			}
		}
	})
}

// The listing of a service whose store returns damaged records lists
// each, after the bans that expire.
func TestSortRecordsDamaged(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	k := func(s string) protect.Key { k, _ := protect.ParseKey(s); return k }
	rs := Records([]protect.Ban{
		{Key: k("192.0.2.9"), Malformed: `"garbage"`},
		{Key: k("192.0.2.1"), Source: protect.SourceManual, Created: now, Expires: now.Add(time.Hour)},
		{Key: k("198.18.0.0/16"), Range: true, Malformed: `offense "x"`},
		{Key: k("192.0.2.2"), Source: protect.SourceManual, Created: now},
	}, now)
	sortRecords(rs)
	var got []string
	for _, r := range rs {
		got = append(got, r.Key)
	}
	if want := []string{"192.0.2.1", "192.0.2.2", "192.0.2.9", "198.18.0.0/16"}; !slices.Equal(got, want) {
		t.Fatalf("sortRecords = %v, want %v", got, want)
	}
}

// ends is when r ends, as the listing orders it: nil for a permanent ban
// or a damaged record.
func ends(r BanRecord) *time.Time {
	if r.Permanent || r.Malformed != "" {
		return nil
	}
	return r.Expires
}
