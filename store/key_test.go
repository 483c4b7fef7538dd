package store

import (
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// modelKeyForm is keyFormOf written plainly, rule by rule, as a model
// of what it decides: FuzzKeyForm keeps the two equal.
func modelKeyForm(id string) keyForm {
	if !modelVerbatimKey(id) {
		return formHashed
	}
	if looksLikeAddr(id) {
		_, errAddr := netip.ParseAddr(id)
		_, errPrefix := netip.ParsePrefix(id)
		if errAddr != nil && errPrefix != nil {
			return formHashed // hex digits with a dot or a colon: maybe a token
		}
		return formAddr
	}
	return formVerbatim
}

// modelVerbatimKey reports whether id passes the rules of a verbatim key
// but the last: it may look like an address.
func modelVerbatimKey(id string) bool {
	if id == "" || len(id) > maxVerbatimKey {
		return false
	}
	run := 0
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && strings.IndexByte("._:@/-", c) < 0 {
			return false
		}
		if alnum {
			run++
			if run >= 20 {
				return false
			}
		} else {
			run = 0
		}
	}
	for _, p := range secretPrefixes {
		if strings.HasPrefix(id, p) {
			return false
		}
	}
	return true
}

func FuzzKeyForm(f *testing.F) {
	for _, s := range []string{"cus_alpha", "10.0.0.1", "2001:db8::1", "fe80::1%eth0", "sk_live_x", "AKIAXXXX", "a.b", "dead:beef", "abcdefghijklmnopqrst", "a%b", "ab/cd", "", "é", "10.0.0.1/8", "3f9c2e1a:7b4d8e0f", "1.2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := keyFormOf(id), modelKeyForm(id); got != want {
			t.Fatalf("keyFormOf(%q) = %v, want %v", id, got, want)
		}
	})
}

// The cache of hashed consumer keys gives what ConsumerKey gives, and
// stays within its sets however many identifiers pass.
func TestConsumerKeysCache(t *testing.T) {
	var c KeyCache
	for range 2 {
		for _, id := range []string{"cus_alpha", "10.0.0.1", "sk_live_0123456789abcdefghij", "2001:db8::1", "3f9c2e1a:7b4d8e0f", "dead.beef"} {
			if got, want := c.Key(id), ConsumerKey(id); got != want {
				t.Fatalf("KeyCache.Key(%q) = %v, want %v", id, got, want)
			}
		}
	}
	for i := range 5 * keyCacheSets {
		id := fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)
		if got, want := c.Key(id), ConsumerKey(id); got != want {
			t.Fatalf("KeyCache.Key(%q) = %v, want %v", id, got, want)
		}
	}
	// A repeated id that is not verbatim is a hit: no SHA-256, no
	// allocation.
	for _, id := range []string{"10.200.0.1", "sk_live_0123456789abcdefghij", "3f9c2e1a:7b4d8e0f"} {
		c.Key(id)
		if allocs := testing.AllocsPerRun(100, func() { c.Key(id) }); allocs != 0 {
			t.Fatalf("KeyCache.Key(%q) again allocates %v times, want 0 (a cache hit)", id, allocs)
		}
	}
	// An address-shaped hit is an exact match: ids that share a set each
	// get their own key.
	var d KeyCache
	d.Key("10.0.0.1")
	set := maphash.String(d.seeds[0], "10.0.0.1") & (keyCacheSets - 1)
	var same []string
	for i := 0; len(same) < 8 && i < 1<<24; i++ {
		id := fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)
		if maphash.String(d.seeds[0], id)&(keyCacheSets-1) == set {
			same = append(same, id)
		}
	}
	for range 2 {
		for _, id := range same {
			if got := d.Key(id); got.Name != "~"+id {
				t.Fatalf("KeyCache.Key(%q) in a shared set = %q, want %q", id, got.Name, "~"+id)
			}
		}
	}
}

// Goroutines that share the cache's sets, with ids of every form, each
// get their own id's key: a way is replaced whole, never seen half
// written (run with -race), and a hit is never another id's.
func TestConsumerKeysConcurrent(t *testing.T) {
	var c KeyCache
	ids := make([]string, 0, 3*4096)
	for i := range 4096 {
		ids = append(ids, fmt.Sprintf("10.0.%d.%d", i>>8, i&255), fmt.Sprintf("%04x:%04x:%04x", i, i, i), fmt.Sprintf("sk_live_%020d", i))
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 3 {
				for i := range ids {
					id := ids[(i*7+g*911+r*31)%len(ids)]
					if got, want := c.Key(id), ConsumerKey(id); got != want {
						t.Errorf("KeyCache.Key(%q) = %v, want %v", id, got, want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

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
