package protect

// counterTable is the memory store's table of stream counters: open
// addressing with linear probing, keyed by a comparable value whose hash
// the caller has already computed (it also picked the shard).
//
// It exists because counting is the hot path. A Go map of struct keys
// hashes the key twice per request (read, then write back); this table
// hashes nothing itself, finds a key in one probe and updates it in
// place. Slots hold no pointers for address keys, so the
// garbage collector never scans them. Not safe for concurrent use: its
// shard's mutex guards it.
type counterTable[K comparable] struct {
	slots []counterSlot[K]
	used  int
	hash  func(K) uint64 // the caller's hash; needed to move slots
}

type counterSlot[K comparable] struct {
	key K
	n   int64 // the count; 0 marks an empty slot
	exp int64 // ticks
}

const minTableSize = 16

// index is where hash h starts probing. The shard was chosen by the top
// bits of h, so the table uses the bottom ones.
func (t *counterTable[K]) index(h uint64) int { return int(h) & (len(t.slots) - 1) }

// find returns the slot holding k, or the empty slot where k would go.
func (t *counterTable[K]) find(k K, h uint64) (i int, ok bool) {
	if len(t.slots) == 0 {
		return -1, false
	}
	mask := len(t.slots) - 1
	for i = t.index(h); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.n == 0 {
			return i, false
		}
		if s.key == k {
			return i, true
		}
	}
}

// insert puts k, known to be absent, in the table and returns its slot.
func (t *counterTable[K]) insert(k K, h uint64, n, exp int64) int {
	if (t.used+1)*4 > len(t.slots)*3 { // keep the load under 3/4
		t.resize(max(2*len(t.slots), minTableSize))
	}
	i, _ := t.find(k, h)
	t.slots[i] = counterSlot[K]{key: k, n: n, exp: exp}
	t.used++
	return i
}

// remove empties slot i and shifts later slots of the same probe run back,
// so no tombstones are needed and lookups stay short.
func (t *counterTable[K]) remove(i int) {
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.slots[j].n != 0; j = (j + 1) & mask {
		home := t.index(t.hash(t.slots[j].key))
		// Move j into the hole at i unless its home lies cyclically in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = counterSlot[K]{}
	t.used--
}

func (t *counterTable[K]) resize(size int) {
	old := t.slots
	t.slots = make([]counterSlot[K], size)
	for _, s := range old {
		if s.n != 0 {
			i, _ := t.find(s.key, t.hash(s.key))
			t.slots[i] = s
		}
	}
}

// evict removes one counter to make room: the one worth least among the
// first 16 found from a pseudo-random start. An expired counter is worth
// nothing; otherwise the lowest count goes, the one expiring first on a
// tie. A flood of fresh keys thus evicts its own kind, at count 1, never
// a busy client's counter, which would come back at 1 and hand that
// client a fresh allowance. And a counter past limit (the MaxRequests of the
// request that needs the room; 0: none) is evicted only when every other
// is past it too: while the 16 hold nothing within limit, the search goes
// on through the table.
func (t *counterTable[K]) evict(start uint64, now, limit int64) {
	if t.used == 0 {
		return
	}
	mask := len(t.slots) - 1
	victim, seen := -1, 0
	for i := int(start>>17) & mask; seen < t.used; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.n == 0 {
			continue
		}
		seen++
		if s.exp <= now {
			victim = i
			break
		}
		if victim < 0 || s.n < t.slots[victim].n || s.n == t.slots[victim].n && s.exp < t.slots[victim].exp {
			victim = i
		}
		if seen >= 16 && (limit <= 0 || t.slots[victim].n <= limit) {
			break
		}
	}
	t.remove(victim)
}

// sweep removes every counter expired at now and shrinks a table that has
// emptied out, so memory taken by a flood of addresses is given back.
func (t *counterTable[K]) sweep(now int64) {
	for i := 0; i < len(t.slots); {
		if s := &t.slots[i]; s.n != 0 && s.exp <= now {
			t.remove(i) // a later slot may have moved into i: look again
			continue
		}
		i++
	}
	if len(t.slots) > minTableSize && t.used*8 < len(t.slots) {
		size := minTableSize
		for size*3 < t.used*8 { // the smallest power of two at most 3/8 full
			size *= 2
		}
		t.resize(size)
	}
}
