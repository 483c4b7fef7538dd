package blocklist

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// TestBlockSetEntries: Entries gives back every entry a set holds, with
// its note and end, as a prefix of the width it was listed at; an entry
// inside a wider one is not among them.
func TestBlockSetEntries(t *testing.T) {
	end := time.Unix(1_900_000_000, 0)
	in := []Entry{
		{Prefix: netip.MustParsePrefix("192.0.2.7/32"), Note: "one"},
		{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Expires: end},
		{Prefix: netip.MustParsePrefix("198.51.100.9/32")}, // inside the /24
		{Prefix: netip.MustParsePrefix("0.0.0.0/1")},
		{Prefix: netip.MustParsePrefix("2001:db8::/48"), Note: "v6"},
		{Prefix: netip.MustParsePrefix("2001:db8:ffff:1::/64")},
		{Prefix: netip.MustParsePrefix("2001:db8:ffff:2::1/128")},
		{Prefix: netip.MustParsePrefix("::ffff:203.0.113.0/120")},
		{Prefix: netip.MustParsePrefix("::/0")},          // a whole family: skipped
		{Prefix: netip.MustParsePrefix("::ffff:0:0/96")}, // 0.0.0.0/0 unmapped: skipped
	}
	got := fmt.Sprint(NewSet(in).Entries())
	want := fmt.Sprint([]Entry{
		{Prefix: netip.MustParsePrefix("0.0.0.0/1")},
		{Prefix: netip.MustParsePrefix("192.0.2.7/32"), Note: "one"},
		{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Expires: end},
		{Prefix: netip.MustParsePrefix("203.0.113.0/24")},
		{Prefix: netip.MustParsePrefix("2001:db8::/48"), Note: "v6"},
		{Prefix: netip.MustParsePrefix("2001:db8:ffff:1::/64")},
		{Prefix: netip.MustParsePrefix("2001:db8:ffff:2::1/128")},
	})
	if got != want {
		t.Fatalf("NewSet(%v).Entries() =\n%s\nwant\n%s", in, got, want)
	}
	if e := (*Set)(nil).Entries(); e != nil {
		t.Fatalf("(*Set)(nil).Entries() = %v, want nil", e)
	}
}
