package admin

import (
	"cmp"
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
// allowed path costs nothing. The zero value holds DefaultRefusedSize
// keys on the wall clock; it is safe for concurrent use.
type Refused struct {
	mu    sync.Mutex
	size  int
	clock func() time.Time
	keys  map[string]*RefusedKey
}

// RefusedKey is one key of a Refused, as the dashboard shows it. The
// zero value is a key never refused.
type RefusedKey struct {
	Key string `json:"key"`
	// Count is the refusals counted since the key entered the table,
	// Error how many of them it may have inherited from the key whose
	// place it took.
	Count uint64 `json:"count"`
	Error uint64 `json:"error"`
	// Status is the decision of its last refusal; Last its time.
	Status string    `json:"status"`
	Last   time.Time `json:"last"`
}

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
	if r.keys == nil {
		r.keys = make(map[string]*RefusedKey)
	}
	if k, ok := r.keys[key]; ok {
		k.Count++
		k.Status, k.Last = status.String(), now
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
		var least *RefusedKey
		for _, k := range r.keys {
			if least == nil || k.Count < least.Count || k.Count == least.Count && k.Key < least.Key {
				least = k
			}
		}
		delete(r.keys, least.Key)
		count = least.Count
	}
	r.keys[key] = &RefusedKey{Key: key, Count: count + 1, Error: count, Status: status.String(), Last: now}
}

// expire drops the keys not refused for RefusedWindow.
func (r *Refused) expire(now time.Time) {
	for key, k := range r.keys {
		if now.Sub(k.Last) >= RefusedWindow {
			delete(r.keys, key)
		}
	}
}

// Top returns the n keys refused most (every key for n ≤ 0), the most
// first, then by key. A nil Refused has none.
func (r *Refused) Top(n int) []RefusedKey {
	out := []RefusedKey{}
	if r == nil {
		return out
	}
	now := r.now()
	r.mu.Lock()
	r.expire(now)
	for _, k := range r.keys {
		out = append(out, *k)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b RefusedKey) int {
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
