package memstore

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
//
// One counter, the front, sits outside the slots, in the table's first
// words: beside its shard's lock, on the lock's cache line. A key that
// one client hammers from several cores then moves one line between them
// per request, not two (the lock's and its slot's), which is what made
// a hot key slower in parallel than alone. The front goes to the first
// key counted while it is empty or over, and to a key counted in the
// slots that has more than twice the front's count: a key much busier
// than the others of its shard ends up there, and two keys of like
// counts do not swap on every request. An index of -1 (frontIndex)
// names it.
type counterTable[K comparable] struct {
	front counterSlot[K]
	slots []counterSlot[K]
	used  int            // counters in slots; the front is not one of them
	hash  func(K) uint64 // the caller's hash; needed to move slots
}

// frontIndex is the index that names the front counter.
const frontIndex = -1

type counterSlot[K comparable] struct {
	key K
	n   int64 // the count; 0 marks an empty slot
	exp int64 // ticks
}

const minTableSize = 16

// index is where hash h starts probing. The shard was chosen by the top
// bits of h, so the table uses the bottom ones.
func (t *counterTable[K]) index(h uint64) int { return int(h) & (len(t.slots) - 1) }

// at returns the counter at index i: a slot, or the front.
func (t *counterTable[K]) at(i int) *counterSlot[K] {
	if i == frontIndex {
		return &t.front
	}
	return &t.slots[i]
}

// count is the number of counters held, the front included.
func (t *counterTable[K]) count() int {
	if t.front.n != 0 {
		return t.used + 1
	}
	return t.used
}

// find returns the index of the counter holding k (frontIndex, or its
// slot), or, with ok false, the empty slot where k would go in the slots
// (-1, which is frontIndex, when there are no slots: use i only if ok).
func (t *counterTable[K]) find(k K, h uint64) (i int, ok bool) {
	if t.front.n != 0 && t.front.key == k {
		return frontIndex, true
	}
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

// insert puts k, known to be absent, in the table and returns its index:
// in the front when that is empty or over at now (an expired counter
// counts as none, so dropping it changes nothing), else in the slots.
func (t *counterTable[K]) insert(k K, h uint64, n, exp, now int64) int {
	if t.front.n == 0 || t.front.exp <= now {
		t.front = counterSlot[K]{key: k, n: n, exp: exp}
		return frontIndex
	}
	return t.insertSlot(k, h, n, exp)
}

// promotes reports whether a request at now moves the counter found at
// index i to the front: one in the slots does when the front is empty or
// over (an empty one is over at 0), or when it is live and has more than
// twice the front's count (an expired one's count is no count).
func (t *counterTable[K]) promotes(i int, now int64) bool {
	if i == frontIndex {
		return false
	}
	s := &t.slots[i]
	return t.front.exp <= now || s.exp > now && s.n-t.front.n > t.front.n // n > 2×front.n, without overflow
}

// promote moves the counter in slot i to the front; a front still
// counting at now goes back into the slots. It returns frontIndex.
func (t *counterTable[K]) promote(i int, now int64) int {
	s, f := t.slots[i], t.front
	t.remove(i)
	t.front = s
	if f.n != 0 && f.exp > now {
		t.insertSlot(f.key, t.hash(f.key), f.n, f.exp)
	}
	return frontIndex
}

// insertSlot puts k, known to be absent, in the slots and returns its slot.
func (t *counterTable[K]) insertSlot(k K, h uint64, n, exp int64) int {
	if (t.used+1)*4 > len(t.slots)*3 { // keep the load under 3/4
		t.resize(max(2*len(t.slots), minTableSize))
	}
	i, _ := t.find(k, h)
	t.slots[i] = counterSlot[K]{key: k, n: n, exp: exp}
	t.used++
	return i
}

// remove deletes the counter at index i. A slot emptied shifts later
// slots of the same probe run back, so no tombstones are needed and
// lookups stay short.
func (t *counterTable[K]) remove(i int) {
	if i == frontIndex {
		t.front = counterSlot[K]{}
		return
	}
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
// first 16 found, the front first, then the slots from a pseudo-random
// start. An expired counter is worth
// nothing; otherwise the lowest count goes, the one expiring first on a
// tie. A flood of fresh keys thus evicts its own kind, at count 1, never
// a busy client's counter, which would come back at 1 and hand that
// client a fresh allowance. And a counter past limit (the MaxRequests of the
// request that needs the room; 0: none) is evicted only when every other
// is past it too: while the 16 hold nothing within limit, the search goes
// on through the table.
func (t *counterTable[K]) evict(start uint64, now, limit int64) {
	total := t.count()
	if total == 0 {
		return
	}
	// The front is the first one found, when it holds a counter.
	victim, seen := -2, 0
	if t.front.n != 0 {
		if t.front.exp <= now {
			t.remove(frontIndex)
			return
		}
		victim, seen = frontIndex, 1
	}
	mask := len(t.slots) - 1
	for i := int(start>>17) & mask; seen < total; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.n == 0 {
			continue
		}
		seen++
		if s.exp <= now {
			victim = i
			break
		}
		if victim == -2 {
			victim = i
		} else if v := t.at(victim); s.n < v.n || s.n == v.n && s.exp < v.exp {
			victim = i
		}
		if seen >= 16 && (limit <= 0 || t.at(victim).n <= limit) {
			break
		}
	}
	t.remove(victim)
}

// sweep removes every counter expired at now and shrinks a table that has
// emptied out, so memory taken by a flood of addresses is given back.
func (t *counterTable[K]) sweep(now int64) {
	if t.front.n != 0 && t.front.exp <= now {
		t.remove(frontIndex)
	}
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
