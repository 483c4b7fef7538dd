package store

import (
	"strconv"
	"strings"
	"testing"
)

func FuzzParsePrefix(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "192.0.2.15", "::ffff:10.0.0.0/104", "10.0.0.0/", "1.2.3.4/33", "garbage", "fe80::1%eth0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrefix(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParsePrefix(%q) = %q, want an error quoting the entry", s, err)
			}
			return
		}
		if !p.IsValid() || p != p.Masked() || (p.Addr().Is4In6() && p.Bits() >= 96) {
			t.Fatalf("ParsePrefix(%q) = %v, want a valid, masked and unmapped prefix", s, p)
		}
	})
}
