package admin

import (
	"slices"
	"testing"
	"time"

	"github.com/httpprotect/protect"
)

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
