package admin

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
)

// listed names records in their listed order: key, and what kind.
func listed(rs []BanRecord) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s%s:%s", r.BanNamespace, r.Key, [...]string{"ends", "permanent", "damaged"}[recordRank(r)])
	}
	return b.String()
}

func TestSortRecords(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { e := t0.Add(d); return &e }
	tests := []struct {
		name string
		in   []BanRecord
		want string
	}{
		{"two damaged and one ending", []BanRecord{
			{Key: "b", Malformed: "x"}, {Key: "e", Expires: at(time.Hour)}, {Key: "a", Malformed: "y"},
		}, "e:ends a:damaged b:damaged"},
		{"every kind", []BanRecord{
			{Key: "p", Permanent: true}, {Key: "d", Malformed: "x"}, {Key: "late", Expires: at(2 * time.Hour)},
			{Key: "soon", Expires: at(time.Minute)}, {Key: "n", Expires: nil},
		}, "soon:ends late:ends p:permanent d:damaged n:damaged"},
		{"same end, by list then key", []BanRecord{
			{Key: "b", BanNamespace: "y:", Expires: at(time.Hour)}, {Key: "a", BanNamespace: "y:", Expires: at(time.Hour)},
			{Key: "c", BanNamespace: "x:", Expires: at(time.Hour)},
		}, "x:c:ends y:a:ends y:b:ends"},
	}
	for _, tt := range tests {
		sortRecords(tt.in)
		if got := listed(tt.in); got != tt.want {
			t.Errorf("sortRecords(%s) = %s, want %s", tt.name, got, tt.want)
		}
	}
}

// Whatever records a store returns, a listing sorts them without a
// panic: ending bans by end, then permanent, then damaged.
func FuzzSortRecords(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{3, 3, 3, 0, 0, 0, 0, 0, 0, 0, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var rs []BanRecord
		for len(b) >= 3 {
			r := BanRecord{Key: fmt.Sprint(b[1]), BanNamespace: fmt.Sprint(b[2] % 2)}
			switch b[0] % 4 {
			case 0:
				r.Malformed = "damaged"
			case 1:
				r.Permanent = true
			case 2:
				if len(b) >= 5 {
					e := time.Unix(int64(binary.BigEndian.Uint16(b[3:5])), 0)
					r.Expires = &e
					b = b[2:]
				}
			case 3: // neither an end nor permanent, nor said damaged
			}
			rs = append(rs, r)
			b = b[3:]
		}
		sortRecords(rs)
		for i := 1; i < len(rs); i++ {
			a, c := rs[i-1], rs[i]
			if ra, rc := recordRank(a), recordRank(c); ra > rc || ra == 0 && rc == 0 && a.Expires.After(*c.Expires) {
				t.Fatalf("sortRecords: %s before %s", listed(rs[i-1:i]), listed(rs[i:i+1]))
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

func TestCompareKeys(t *testing.T) {
	keys := []string{"acme", "2001:db8::/64", "10.0.0.10", "10.0.0.0/24", "bob", "10.0.0.9", "2001:db8::1", "9.255.255.255"}
	slices.SortFunc(keys, compareKeys)
	want := "9.255.255.255 10.0.0.0/24 10.0.0.9 10.0.0.10 2001:db8::/64 2001:db8::1 acme bob"
	if got := strings.Join(keys, " "); got != want {
		t.Errorf("keys sorted by compareKeys = %s, want %s", got, want)
	}
}
