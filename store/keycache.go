package store

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// A KeyCache returns ConsumerKey(id) for the identifiers a service sees
// again and again, remembering the keys that ConsumerKey does not keep
// verbatim: its zero value is an empty cache, ready to use, safe for
// concurrent use. Why: hashing costs a SHA-256 and an allocation per
// request, and an address a parse and two allocations ("~" and itself,
// and its way); a hit in the cache costs none of these. Identifiers kept
// verbatim need no cache. What follows is about hashed identifiers; see
// addrHit for addresses.
//
// The cache is a fixed array of 4-way sets, read without a lock. Two
// seeded 64-bit hashes of the identifier are made; the low bits of the
// first pick a set, and a miss replaces one way of it. A way holds the
// key (at most 33 bytes) and both hashes, never the identifier itself: a
// gateway may send identifiers of any length, up to its header cap, and
// the cache must cost the same for each. So it is bounded in bytes
// (keyCacheSets × 4 small entries, allocated on the first one), and an
// attacker with many identifiers costs hashing, never memory. A hit needs
// all 128 bits of the two hashes to match, under seeds no client knows;
// the bits that picked the set match in every way of it, so chance must
// match the other 128 − log2(keyCacheSets). Two identifiers that agree
// on them by chance, or by a client's design, are out of reach: a hash
// of its own for the set would add bits that nothing needs, and one more
// hash to every identifier the cache is asked for.
type KeyCache struct {
	once  sync.Once
	seeds [2]maphash.Seed // the two halves of the check, the first's low bits the set
	sets  []keyCacheSet
}

const keyCacheSets = 1 << 14

type keyCacheSet struct {
	ways [4]atomic.Pointer[cachedKey]
	next atomic.Uint32 // the way the next miss replaces
}

type cachedKey struct {
	check [2]uint64 // the identifier's hashes under seeds[0] and seeds[1]
	name  string    // its key
}

// Key returns ConsumerKey(id).
func (c *KeyCache) Key(id string) Key {
	form := keyShapeOf(id)
	if form == formVerbatim {
		return Key{Name: id}
	}
	c.once.Do(func() {
		c.seeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}
		c.sets = make([]keyCacheSet, keyCacheSets)
	})
	h := maphash.String(c.seeds[0], id)
	set := &c.sets[h&(keyCacheSets-1)]
	if form == formAddr {
		if name, ok := set.addrHit(id); ok {
			return Key{Name: name}
		}
	}
	check := [2]uint64{h, maphash.String(c.seeds[1], id)}
	for i := range set.ways {
		if e := set.ways[i].Load(); e != nil && e.check == check {
			return Key{Name: e.name}
		}
	}
	// A miss. Only here is an address-shaped id parsed: one that is no
	// address (a token of hex digits and colons) is hashed, and its
	// next request is a hit above.
	if form == formAddr && isAddrOrCIDR(id) {
		name := "~" + id
		set.ways[set.next.Add(1)%4].Store(&cachedKey{name: name})
		return Key{Name: name}
	}
	k := hashKey(id) // the form is known: ConsumerKey would only look again
	set.ways[set.next.Add(1)%4].Store(&cachedKey{check: check, name: k.Name})
	return k
}

// addrHit looks up an identifier shaped like an address (keyShapeOf),
// whose key, when it is an address or CIDR, is "~" and itself. An address
// is no secret and at most maxVerbatimKey bytes, so a hit compares the
// key with it, exactly, and the first hash alone picks the set. Only an
// id that parsed as an address is stored so, and a hashed key (hex
// digits alone) never equals "~" and an id with a dot or a colon. The
// way's check stays zero, which both hashes of an identifier match by a
// chance of 2^-128.
func (s *keyCacheSet) addrHit(id string) (name string, ok bool) {
	for i := range s.ways {
		if e := s.ways[i].Load(); e != nil && len(e.name) == len(id)+1 && e.name[1:] == id {
			return e.name, true
		}
	}
	return "", false
}
