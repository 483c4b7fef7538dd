package main

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/httpprotect/protect"
)

// TestKeyValues: whatever the cache holds, each key gets its own text,
// with more keys than slots (so that they collide) and asked twice.
func TestKeyValues(t *testing.T) {
	c := newKeyValues()
	var keys []protect.Key
	for i := range 3 * keySlots {
		keys = append(keys, protect.Key{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)})
	}
	keys = append(keys,
		protect.Key{Prefix: netip.MustParsePrefix("2001:db8:1:2::/64")},
		protect.Key{Prefix: netip.MustParsePrefix("2001:db8:1:2::/56")},
		protect.Key{Name: "acme"}, protect.Key{Name: "10.0.0.1"})
	for round := range 2 {
		for _, k := range keys {
			if got := c.get(k); len(got) != 1 || got[0] != k.String() {
				t.Fatalf("keyValues.get(%v), round %d = %q, want [%q]", k, round+1, got, k.String())
			}
		}
	}
	if got, want := fmt.Sprint(c.get(keys[0])), fmt.Sprint([]string{"10.0.0.0"}); got != want {
		t.Fatalf("keyValues.get(10.0.0.0/32) = %s, want %s", got, want)
	}
}
