package protect

import (
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
	var c consumerKeys
	for range 2 {
		for _, id := range []string{"cus_alpha", "10.0.0.1", "sk_live_0123456789abcdefghij", "2001:db8::1", "3f9c2e1a:7b4d8e0f", "dead.beef"} {
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
	for _, id := range []string{"10.200.0.1", "sk_live_0123456789abcdefghij", "3f9c2e1a:7b4d8e0f"} {
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

// Goroutines that share the cache's sets, with ids of every form, each
// get their own id's key: a way is replaced whole, never seen half
// written (run with -race), and a hit is never another id's.
func TestConsumerKeysConcurrent(t *testing.T) {
	t.Run("no store", func(t *testing.T) { testConsumerKeysConcurrent(t, nil) })
	t.Run("memory store", func(t *testing.T) {
		p, err := New(Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		if p.mem == nil {
			t.Fatal("New(Config{}).mem = nil, want its memory store's space")
		}
		testConsumerKeysConcurrent(t, p.mem)
	})
}

// testConsumerKeysConcurrent is TestConsumerKeysConcurrent for a cache
// whose ways keep mem's hash (none for nil).
func testConsumerKeysConcurrent(t *testing.T, mem *memSpace) {
	t.Helper()
	c := consumerKeys{mem: mem}
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
					got, hint := c.keyAndHash(id)
					if want := ConsumerKey(id); got != want {
						t.Errorf("consumerKeys.key(%q) = %v, want %v", id, got, want)
						return
					}
					if mem != nil && keyFormOf(id) != formVerbatim && hint != mem.nameHash(got.Name) {
						t.Errorf("consumerKeys.keyAndHash(%q) = hash %#x, want %#x", id, hint, mem.nameHash(got.Name))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// On the memory store the cache hands out the store's own hash of each
// key it holds, for the protector's namespace, so a plan decided with it
// lands in the entry that the store finds by hashing the key itself; on
// any other store, and for an id kept verbatim, the hash is 0 and the
// store makes it.
func TestConsumerKeysStoreHash(t *testing.T) {
	quota := mustPlan(t, "q", Quota{Name: "daily", Limit: 100, Period: Daily})
	ctx := t.Context()
	clk := newFakeClock()
	s := NewMemoryStore(MemoryOptions{Clock: clk.Now})
	t.Cleanup(func() { s.Close() })
	ids := []string{"10.0.0.1", "2001:db8::1", "10.0.0.0/8", "sk_live_0123456789abcdefghij", "3f9c2e1a:7b4d8e0f", "acme"}
	for _, ns := range []string{"api", "web"} {
		p, err := New(Config{Store: s, Namespace: ns, Clock: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		ms, ok := p.raw.(*memSpace)
		if !ok {
			t.Fatalf("New(Config{Store: a MemoryStore}).raw = %T, want *memSpace", p.raw)
		}
		for _, id := range ids {
			// The first request is the cache's miss, the second its hit.
			for call := int64(1); call <= 2; call++ {
				d, err := p.VerifyConsumerN(ctx, id, quota, 3)
				if err != nil || d.Status != Allowed || d.Remaining != 100-3*call {
					t.Fatalf("%s: VerifyConsumerN(%q, cost 3), call %d = %v remaining %d, %v; want Allowed remaining %d, no error",
						ns, id, call, d.Status, d.Remaining, err, 100-3*call)
				}
				k, hint := p.consumerKeys.keyAndHash(id)
				_, _, want := ms.nameKey(k.Name)
				if keyFormOf(id) == formVerbatim {
					want = 0
				}
				if hint != want {
					t.Fatalf("%s: consumerKeys.keyAndHash(%q) after call %d = hash %#x, want %#x", ns, id, call, hint, want)
				}
				st, err := ms.Inspect(ctx, k)
				if err != nil || len(st.Usage) != 1 || st.Usage[0].Used != 3*call {
					t.Fatalf("%s: Inspect(%v) after %d VerifyConsumerN(%q, cost 3) = %+v, %v; want daily used %d",
						ns, k, call, id, st.Usage, err, 3*call)
				}
			}
		}
	}
	// Behind another store, the cache holds no hash.
	p, err := New(Config{Store: ifaceStore{s}, Namespace: "other", Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	for call := 1; call <= 2; call++ {
		if _, hint := p.consumerKeys.keyAndHash("10.0.0.1"); hint != 0 {
			t.Fatalf("consumerKeys.keyAndHash(10.0.0.1) behind ifaceStore, call %d = hash %#x, want 0", call, hint)
		}
	}
}
