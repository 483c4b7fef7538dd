package memstore

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestCounterTableModel drives counterTable and a Go map with the same
// random operations and requires them to agree after every step. The hash
// functions include a deliberately bad one, so that long probe runs,
// wrap-around and backward-shift deletion are all exercised.
func TestCounterTableModel(t *testing.T) {
	hashes := map[string]func(uint64) uint64{
		"mixed":     func(k uint64) uint64 { k *= 0x9e3779b97f4a7c15; return k ^ k>>29 },
		"collision": func(k uint64) uint64 { return k % 3 }, // three probe runs for everything
		"identity":  func(k uint64) uint64 { return k },
	}
	for name, hash := range hashes {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			tab := counterTable[uint64]{hash: hash}
			model := map[uint64]counterSlot[uint64]{}
			check := func(step int, now int64) {
				t.Helper()
				// The table may drop a counter over at now whenever it
				// likes (inserting into, or promoting to, an expired
				// front does): one over counts as none.
				for k, c := range model {
					if _, ok := tab.find(k, hash(k)); !ok && c.exp <= now {
						delete(model, k)
					}
				}
				if tab.count() != len(model) {
					t.Fatalf("step %d: counterTable.count() = %d, want %d (the model's)", step, tab.count(), len(model))
				}
				for k, want := range model {
					i, ok := tab.find(k, hash(k))
					if !ok || *tab.at(i) != want {
						t.Fatalf("step %d: find(%d) = %v, counter %+v; want true, %+v", step, k, ok, *tab.at(i), want)
					}
				}
			}
			for step := range 20000 {
				k := rng.Uint64N(300)
				now := int64(step)
				switch op := rng.IntN(10); {
				case op < 5: // count
					if i, ok := tab.find(k, hash(k)); ok {
						if tab.promotes(i, now) {
							i = tab.promote(i, now)
						}
						c := tab.at(i)
						c.n++
						c.exp = now + rng.Int64N(500)
						model[k] = *c
					} else {
						i := tab.insert(k, hash(k), 1, now+rng.Int64N(500), now)
						model[k] = *tab.at(i)
					}
				case op < 8: // remove
					if i, ok := tab.find(k, hash(k)); ok {
						tab.remove(i)
						delete(model, k)
					}
				case op < 9: // sweep
					tab.sweep(now)
					for mk, c := range model {
						if c.exp <= now {
							delete(model, mk)
						}
					}
				default: // evict
					before := tab.count()
					tab.evict(rng.Uint64(), now, 0)
					if before > 0 && tab.count() != before-1 {
						t.Fatalf("step %d: evict() removed %d counters, want 1", step, before-tab.count())
					}
					for mk := range model {
						if _, ok := tab.find(mk, hash(mk)); !ok {
							delete(model, mk)
						}
					}
				}
				check(step, now)
			}
		})
	}
}

// A table that filled up and emptied gives its memory back.
func TestCounterTableShrinks(t *testing.T) {
	hash := func(k uint64) uint64 { return k * 0x9e3779b97f4a7c15 }
	tab := counterTable[uint64]{hash: hash}
	for k := range uint64(100000) {
		tab.insert(k, hash(k), 1, int64(k%2), 0)
	}
	big := len(tab.slots)
	tab.sweep(1) // drops the even keys' counters (exp 0 ≤ 1) and the odd ones (exp 1 ≤ 1)
	if tab.count() != 0 || len(tab.slots) != minTableSize {
		t.Fatalf("sweep(1) of everything: count() = %d in %d slots (from %d); want 0 in %d", tab.count(), len(tab.slots), big, minTableSize)
	}
}

// Each shard's lock and front counter share one cache line, in the
// tables the store really allocates (memtable.go's shard says why the
// slice's start moves with the number of shards); TestShardSize holds the
// shard to 128 bytes.
func TestShardLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the figures are for 64-bit platforms")
	}
	for _, n := range []int{1, 2, 8, 64, 128, 256, 1024} {
		a := newTable[addrKey](n, 1, func(addrKey) uint64 { return 0 })
		b := newTable[nameKey](n, 1, func(nameKey) uint64 { return 0 })
		for i := range n {
			for _, sh := range []struct {
				kind       string
				mu         uintptr
				front, end uintptr // the front's first and last byte + 1
			}{
				{"addrKey", uintptr(unsafe.Pointer(&a.shards[i].mu)), uintptr(unsafe.Pointer(&a.shards[i].counters.front)), uintptr(unsafe.Pointer(&a.shards[i].counters.front)) + unsafe.Sizeof(a.shards[i].counters.front)},
				{"nameKey", uintptr(unsafe.Pointer(&b.shards[i].mu)), uintptr(unsafe.Pointer(&b.shards[i].counters.front)), uintptr(unsafe.Pointer(&b.shards[i].counters.front)) + unsafe.Sizeof(b.shards[i].counters.front)},
			} {
				if line := sh.mu / 64; sh.front/64 != line || (sh.end-1)/64 != line {
					t.Fatalf("newTable[%s](%d).shards[%d]: lock at byte %d of its line, front at bytes %d to %d; want the front on the lock's line", sh.kind, n, i, sh.mu%64, sh.front-line*64, sh.end-1-line*64)
				}
			}
		}
	}
}

// The front goes to the first key counted, and then to a key in the slots
// that has more than twice its count; the front it takes goes back into
// the slots with its count. An expired front goes to whichever key is
// counted next.
func TestCounterTableFront(t *testing.T) {
	hash := func(k uint64) uint64 { return k * 0x9e3779b97f4a7c15 }
	tab := counterTable[uint64]{hash: hash}
	count := func(k uint64, now int64) {
		t.Helper()
		if i, ok := tab.find(k, hash(k)); ok {
			if tab.promotes(i, now) {
				i = tab.promote(i, now)
			}
			tab.at(i).n++
			tab.at(i).exp = now + 100
		} else {
			tab.insert(k, hash(k), 1, now+100, now)
		}
	}
	where := func(k uint64) (front bool, n int64) {
		t.Helper()
		i, ok := tab.find(k, hash(k))
		if !ok {
			t.Fatalf("find(%d) = _, false; want it found", k)
		}
		return i == frontIndex, tab.at(i).n
	}
	steps := []struct {
		key   uint64
		now   int64
		front uint64 // the key in the front after the step
		n     int64  // its count
	}{
		{1, 0, 1, 1},
		{2, 1, 1, 1}, // 2 goes into the slots: the front is taken
		{2, 2, 1, 1}, // found at 1: not more than twice 1
		{2, 3, 1, 1}, // found at 2: not more than twice 1
		{2, 4, 2, 4}, // found at 3, more than twice 1: 2 moves to the front
		{1, 5, 2, 4},
		{1, 6, 2, 4},   // 1 at 3: not more than twice 4
		{3, 200, 3, 1}, // the front is over at 200: 3 takes it
		{1, 201, 3, 1}, // 1's 3, over at 106, is no count: 1 stays in the slots (count adds to it, as take would not)
	}
	for i, s := range steps {
		count(s.key, s.now)
		if front, n := where(s.front); !front || n != s.n {
			t.Fatalf("step %d (count %d at %d): key %d in front %v with count %d; want in front with %d", i, s.key, s.now, s.front, front, n, s.n)
		}
	}
	if front, n := where(1); front || n != 4 {
		t.Fatalf("where(1) = %v, %d; want false, 4 (in the slots: an over counter is not promoted)", front, n)
	}
	if got := tab.count(); got != 2 {
		// 3 in the front; 1 in the slots; 2 was the front that 3
		// replaced when it was over.
		t.Fatalf("count() = %d, want 2", got)
	}
}
