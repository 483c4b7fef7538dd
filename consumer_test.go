package protect

import (
	"fmt"
	"hash/maphash"
	"strings"
	"testing"
)

// modelKeyForm is keyFormOf written plainly, rule by rule, as a model
// of what it decides: FuzzKeyForm keeps the two equal.
func modelKeyForm(id string) keyForm {
	if !modelVerbatimKey(id) {
		return formHashed
	}
	if looksLikeAddr(id) {
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
	for _, s := range []string{"cus_alpha", "10.0.0.1", "2001:db8::1", "fe80::1%eth0", "sk_live_x", "AKIAXXXX", "a.b", "dead:beef", "abcdefghijklmnopqrst", "a%b", "ab/cd", "", "é"} {
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
	var c consumerKeys
	for range 2 {
		for _, id := range []string{"cus_alpha", "10.0.0.1", "sk_live_0123456789abcdefghij", "2001:db8::1"} {
			if got, want := c.key(id), ConsumerKey(id); got != want {
				t.Fatalf("consumerKeys.key(%q) = %v, want %v", id, got, want)
			}
		}
	}
	for i := range 5 * keyCacheSets {
		id := fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)
		if got, want := c.key(id), ConsumerKey(id); got != want {
			t.Fatalf("consumerKeys.key(%q) = %v, want %v", id, got, want)
		}
	}
	// A repeated id that is not verbatim is a hit: no SHA-256, no
	// allocation.
	for _, id := range []string{"10.200.0.1", "sk_live_0123456789abcdefghij"} {
		c.key(id)
		if allocs := testing.AllocsPerRun(100, func() { c.key(id) }); allocs != 0 {
			t.Fatalf("consumerKeys.key(%q) again allocates %v times, want 0 (a cache hit)", id, allocs)
		}
	}
	// An address-shaped hit is an exact match: ids that share a set each
	// get their own key.
	var d consumerKeys
	d.key("10.0.0.1")
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
			if got := d.key(id); got.Name != "~"+id {
				t.Fatalf("consumerKeys.key(%q) in a shared set = %q, want %q", id, got.Name, "~"+id)
			}
		}
	}
}
