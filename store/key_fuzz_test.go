package store

import (
	"encoding/hex"
	"strings"
	"testing"
)

// A consumer key is the identifier itself, "~" and an address-shaped
// identifier, or a hash: never a transformed secret, and always a key
// ParseKey reads back.
func FuzzConsumerKey(f *testing.F) {
	for _, s := range []string{"cus_alpha", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "", "{slot}", "~" + strings.Repeat("a", 32), "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		k := ConsumerKey(id)
		switch {
		case k.Name == id:
			if f := keyFormOf(id); f != formVerbatim {
				t.Fatalf("keyFormOf(%q) = %d, want %d (formVerbatim): ConsumerKey keeps it as it is", id, f, formVerbatim)
			}
		case k.Name == "~"+id:
			if f := keyFormOf(id); f != formAddr || !looksLikeAddr(id) || !isAddrOrCIDR(id) {
				t.Fatalf("keyFormOf(%q), looksLikeAddr, isAddrOrCIDR = %d, %v, %v; want %d (formAddr), true, true: ConsumerKey keeps it as %q", id, f, looksLikeAddr(id), isAddrOrCIDR(id), formAddr, k.Name)
			}
		case len(k.Name) == 33 && k.Name[0] == '~':
			if _, err := hex.DecodeString(k.Name[1:]); err != nil {
				t.Fatalf("ConsumerKey(%q) = %q, want ~ and 32 hex digits", id, k.Name)
			}
		default:
			t.Fatalf("ConsumerKey(%q) = %q, want the id itself, ~ and itself, or ~ and 32 hex digits", id, k.Name)
		}
		if strings.ContainsAny(k.Name, "{}") {
			t.Fatalf("ConsumerKey(%q) = %q, want no { or }: they would break the hash tag", id, k.Name)
		}
		if back, err := ParseKey(k.Name); err != nil || back != k {
			t.Fatalf("ParseKey(%q) = %+v, %v; want %+v", k.Name, back, err, k)
		}
	})
}

// ParseKey reads back what Key.String writes.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"203.0.113.7", "2001:db8:1:2::/64", "cus_alpha", "10.0.0.0/", "::ffff:1.2.3.4", "garbage"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			return
		}
		back, err := ParseKey(k.String())
		if err != nil || back != k {
			t.Fatalf("ParseKey(%q) = %+v, but ParseKey(%q) = %+v, %v", s, k, k.String(), back, err)
		}
	})
}
