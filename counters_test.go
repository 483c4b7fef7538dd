package protect

import (
	"math/rand/v2"
	"testing"
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
			check := func(step int) {
				t.Helper()
				if tab.used != len(model) {
					t.Fatalf("step %d: counterTable.used = %d, want %d (the model's)", step, tab.used, len(model))
				}
				for k, want := range model {
					i, ok := tab.find(k, hash(k))
					if !ok || tab.slots[i] != want {
						t.Fatalf("step %d: find(%d) = %v, slot %+v; want true, %+v", step, k, ok, tab.slots[i], want)
					}
				}
			}
			for step := range 20000 {
				k := rng.Uint64N(300)
				now := int64(step)
				switch op := rng.IntN(10); {
				case op < 5: // count
					if i, ok := tab.find(k, hash(k)); ok {
						tab.slots[i].n++
						tab.slots[i].exp = now + rng.Int64N(500)
						model[k] = tab.slots[i]
					} else {
						i := tab.insert(k, hash(k), 1, now+rng.Int64N(500))
						model[k] = tab.slots[i]
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
					before := tab.used
					tab.evict(rng.Uint64(), now, 0)
					if before > 0 && tab.used != before-1 {
						t.Fatalf("step %d: evict() removed %d counters, want 1", step, before-tab.used)
					}
					for mk := range model {
						if _, ok := tab.find(mk, hash(mk)); !ok {
							delete(model, mk)
						}
					}
				}
				check(step)
			}
		})
	}
}

// A table that filled up and emptied gives its memory back.
func TestCounterTableShrinks(t *testing.T) {
	hash := func(k uint64) uint64 { return k * 0x9e3779b97f4a7c15 }
	tab := counterTable[uint64]{hash: hash}
	for k := range uint64(100000) {
		tab.insert(k, hash(k), 1, int64(k%2))
	}
	big := len(tab.slots)
	tab.sweep(1) // drops the even keys' counters (exp 0 ≤ 1) and the odd ones (exp 1 ≤ 1)
	if tab.used != 0 || len(tab.slots) != minTableSize {
		t.Fatalf("sweep(1) of everything: used = %d in %d slots (from %d); want 0 in %d", tab.used, len(tab.slots), big, minTableSize)
	}
}
