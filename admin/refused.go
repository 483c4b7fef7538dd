package admin

import (
	"cmp"
	"container/heap"
	"slices"
	"sync"
	"time"

	"github.com/httpprotect/protect"
)

// DefaultRefusedSize is the number of keys a Refused built with size 0
// holds.
const DefaultRefusedSize = 64

// RefusedWindow is how long a key stays in a Refused after its last
// refusal.
const RefusedWindow = 5 * time.Minute

// Refused counts the keys refused most, for the dashboard's "now" page,
// in bounded memory: it holds at most its size of keys, and a refusal
// of a new key when it is full takes the place of the key counted least
// (the space-saving algorithm: a heavy hitter is never pushed out by a
// stream of one-off keys, and the count it shows is at most its error
// above the truth). A key not refused for RefusedWindow leaves it.
//
// It is fed by whoever sees refusals (protectd counts each refusal it
// answers on /verify; a Go service can call Add from its middleware's
// refusal path or its Logger), never by the protector itself: the
// allowed path costs nothing. Add does bounded work under its lock, full
// or not: the key counted least is the top of a heap (O(log size)), and
// the keys whose window has passed leave from the end of a list in the
// order of their last refusal, each once. The zero value holds
// DefaultRefusedSize keys on the wall clock; it is safe for concurrent
// use.
type Refused struct {
	mu    sync.Mutex
	size  int
	clock func() time.Time
	keys  map[string]*refusedEntry
	least refusedHeap  // by Count, then Key: the next to give its place
	lru   refusedEntry // the sentinel of a ring, the latest refused after it
}

// refusedEntry is a key of a Refused, in its heap and its list.
type refusedEntry struct {
	RefusedKey
	index      int // in the heap
	prev, next *refusedEntry
}

// refusedHeap orders the entries by Count, then Key, the least on top.
type refusedHeap []*refusedEntry

func (h refusedHeap) Len() int { return len(h) }
func (h refusedHeap) Less(i, j int) bool {
	return h[i].Count < h[j].Count || h[i].Count == h[j].Count && h[i].Key < h[j].Key
}
func (h refusedHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *refusedHeap) Push(x any) {
	e := x.(*refusedEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *refusedHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// RefusedKey is one key of a Refused, as the dashboard shows it. The
// zero value is a key never refused.
type RefusedKey struct {
	Key string `json:"key"`
	// Count is the refusals counted since the key entered the table,
	// Error how many of them it may have inherited from the key whose
	// place it took: the key was refused at least Count − Error times
	// (AtLeast), at most Count.
	Count uint64 `json:"count"`
	Error uint64 `json:"error"`
	// Status is the decision of its last refusal; Last its time.
	Status string    `json:"status"`
	Last   time.Time `json:"last"`
}

// AtLeast is the refusals of k that are certain, Count − Error: what the
// dashboard shows, for Count of a key that took another's place holds
// the other's count too.
func (k RefusedKey) AtLeast() uint64 { return k.Count - k.Error }

// NewRefused returns a Refused of size keys (0: DefaultRefusedSize) on
// clock (nil: time.Now).
func NewRefused(size int, clock func() time.Time) *Refused {
	return &Refused{size: size, clock: clock}
}

func (r *Refused) now() time.Time {
	if r.clock == nil {
		return time.Now()
	}
	return r.clock()
}

// Add counts one refusal of key with status. A nil Refused counts
// nothing.
func (r *Refused) Add(key string, status protect.Status) {
	if r == nil {
		return
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	if e, ok := r.keys[key]; ok {
		e.Count++
		e.Status, e.Last = status.String(), now
		heap.Fix(&r.least, e.index)
		r.unlink(e)
		r.pushFront(e)
		return
	}
	size := r.size
	if size <= 0 {
		size = DefaultRefusedSize
	}
	var count uint64
	if len(r.keys) >= size {
		r.expire(now)
	}
	if len(r.keys) >= size {
		least := r.least[0]
		r.remove(least)
		count = least.Count
	}
	e := &refusedEntry{RefusedKey: RefusedKey{Key: key, Count: count + 1, Error: count, Status: status.String(), Last: now}}
	r.keys[key] = e
	heap.Push(&r.least, e)
	r.pushFront(e)
}

func (r *Refused) init() {
	if r.keys != nil {
		return
	}
	r.keys = make(map[string]*refusedEntry)
	r.lru.prev, r.lru.next = &r.lru, &r.lru
}

func (r *Refused) pushFront(e *refusedEntry) {
	e.prev, e.next = &r.lru, r.lru.next
	r.lru.next.prev = e
	r.lru.next = e
}

func (r *Refused) unlink(e *refusedEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

// remove takes e out of the table.
func (r *Refused) remove(e *refusedEntry) {
	heap.Remove(&r.least, e.index)
	r.unlink(e)
	delete(r.keys, e.Key)
}

// expire drops the keys not refused for RefusedWindow: from the end of
// the list, the least recently refused, so each costs its own removal
// and the first key still in its window stops it.
func (r *Refused) expire(now time.Time) {
	for e := r.lru.prev; e != &r.lru && now.Sub(e.Last) >= RefusedWindow; e = r.lru.prev {
		r.remove(e)
	}
}

// Top returns the n keys refused most (every key for n ≤ 0): the most
// certain refusals (AtLeast) first, then the most counted, then by key. A
// nil Refused has none.
func (r *Refused) Top(n int) []RefusedKey {
	out := []RefusedKey{}
	if r == nil {
		return out
	}
	now := r.now()
	r.mu.Lock()
	r.init()
	r.expire(now)
	out = slices.Grow(out, len(r.keys))
	for _, e := range r.least {
		out = append(out, e.RefusedKey)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b RefusedKey) int {
		if c := cmp.Compare(b.AtLeast(), a.AtLeast()); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}
