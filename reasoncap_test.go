package protect

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/httpprotect/protect/store"
)

// CheckBan cuts a reason and an author to MaxReasonLen bytes, never
// inside a character, whatever path brought them to a store.
func TestCheckBanCutsReason(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{strings.Repeat("r", MaxReasonLen), MaxReasonLen},
		{strings.Repeat("r", MaxReasonLen+1), MaxReasonLen},
		{strings.Repeat("r", MaxReasonLen-1) + "東", MaxReasonLen - 1},
		{strings.Repeat("x", 10_000), MaxReasonLen},
	} {
		b, err := store.CheckBan(Ban{Key: Key{Name: "cus"}, Source: SourceManual, Reason: tc.in, By: tc.in})
		if err != nil || len(b.Reason) != tc.want || len(b.By) != tc.want || !utf8.ValidString(b.Reason) {
			t.Fatalf("CheckBan(reason of %d bytes) = reason of %d bytes, by of %d, %v; want %d", len(tc.in), len(b.Reason), len(b.By), err, tc.want)
		}
	}
}
