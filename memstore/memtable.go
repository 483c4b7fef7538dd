package memstore

import (
	"math/bits"
	"sync"
	"time"

	"github.com/httpprotect/protect/store"
)

// A table is the memory store's sharded map from keys to counters, bans and
// offense histories. The top bits of a key's hash pick its shard; the
// counter table inside uses the bottom ones. One lock per shard, held for
// one key's whole decision: that is what makes a Take atomic.
//
// A key's counter (in its Namespace) and its ban and offenses (in its
// BanNamespace) are two table keys that differ in their namespace alone.
// The namespace never reaches a hash's top bits (Store.hashAddr), so
// both sit in one shard, under one lock, wherever the ban namespace is.
type table[K tableKey] struct {
	shards   []shard[K]
	shift    uint
	perShard int
	// dirty collects the keys whose ban or offenses changed, for the
	// state file's writer; nil without one (durable.go).
	dirty *dirtyKeys[K]
}

type shard[K tableKey] struct {
	mu       sync.Mutex
	counters counterTable[K] // its front counter shares mu's cache line
	bans     map[K]*heldBan
	offenses map[K]*offenseLog
	// 128 bytes a shard: no two shards' locks share a cache line. The
	// slice is 128-aligned for up to 4 shards and from 256, but from 8 to
	// 128 (the default) the runtime's 8-byte malloc header (pointerful
	// objects over 512 bytes) puts it 8 bytes past a line: the front,
	// ending at byte 48 of the shard, still shares mu's line (at 56), and
	// the bytes a shard writes stay in its own 128.
	_ [24]byte
}

// tableKey is a store-internal key that knows its public Key.
type tableKey interface {
	comparable
	key() store.Key
}

// offenseLog is one key's automatic bans within the offense window.
type offenseLog struct {
	times []int64 // ticks of automatic bans, oldest first
	exp   int64   // the log is forgotten after this
}

func newTable[K tableKey](n, perShard int, hash func(K) uint64) table[K] {
	t := table[K]{shards: make([]shard[K], n), shift: uint(64 - bits.Len(uint(n-1))), perShard: perShard}
	for i := range t.shards {
		t.shards[i].counters.hash = hash
		t.shards[i].bans = make(map[K]*heldBan)
		t.shards[i].offenses = make(map[K]*offenseLog)
	}
	return t
}

// shardIndex is the index of shard(h).
func (t *table[K]) shardIndex(h uint64) int {
	if t.shift == 64 {
		return 0
	}
	return int(h >> t.shift)
}

func (t *table[K]) shard(h uint64) *shard[K] {
	if t.shift == 64 {
		return &t.shards[0]
	}
	return &t.shards[h>>t.shift]
}

func (t *table[K]) len() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += sh.counters.count()
		sh.mu.Unlock()
	}
	return n
}

// take is Space.Take for one key at ticks tk, under its shard's lock: mk
// is its counter, bk its ban and offenses (the same key in the ban
// namespace; mk itself when the two namespaces are one). epoch turns
// ticks into times for a new ban's record; ev is the journal of bk's
// namespace, which only a ban written or found over touches.
func (t *table[K]) take(mk, bk K, h uint64, tk, n int64, lim *store.Limits, epoch *time.Time, ev *eventLog) store.Result {
	sh := &t.shards[0] // t.shard(h), written out
	if t.shift != 64 {
		sh = &t.shards[h>>t.shift]
	}
	sh.mu.Lock()
	// Every return unlocks: a deferred unlock costs the hot path, and
	// nothing here can panic.
	if len(sh.bans) > 0 {
		if b, ok := sh.bans[bk]; ok {
			if b.live(tk) {
				r := b.result(tk)
				sh.mu.Unlock()
				return r
			}
			t.expire(sh, bk, b, tk, ev)
		}
	}
	ct := &sh.counters
	i, ok := ct.find(mk, h)
	c := &ct.front // ct.at(i), written out
	if ok && i != frontIndex {
		c = &ct.slots[i]
	}
	if n == 0 {
		var r store.Result
		if ok && c.exp > tk {
			r.Count = c.n
		}
		sh.mu.Unlock()
		return r
	}
	count := n
	if ok {
		if ct.promotes(i, tk) {
			i = ct.promote(i, tk)
			c = &ct.front
		}
		if c.exp > tk {
			count = satAdd(c.n, n)
		}
		c.n, c.exp = count, satAdd(tk, int64(lim.TTL))
	} else {
		if ct.count() >= t.perShard {
			ct.evict(h, tk, lim.MaxRequests)
		}
		i = ct.insert(mk, h, count, satAdd(tk, int64(lim.TTL)), tk)
	}
	if lim.BanLimit < 0 || count <= lim.BanLimit {
		sh.mu.Unlock()
		return store.Result{Count: count}
	}
	r := sh.ban(mk, bk, i, tk, count, lim, epoch, ev)
	t.dirty.add(bk) // under the lock, which Close takes to stop the notes
	sh.mu.Unlock()
	return r
}

// ban bans mk, whose counter at index i has just passed BanLimit at ticks
// tk, under the shard's lock. The counter goes, so that a lifted client
// starts again from nothing instead of being banned again on its next
// request.
func (sh *shard[K]) ban(mk, bk K, i int, tk, count int64, lim *store.Limits, epoch *time.Time, ev *eventLog) store.Result {
	sh.counters.remove(i)
	offense := sh.offend(bk, tk, lim.OffenseWindow)
	length := store.BanLength(lim, offense)
	created := epoch.Add(time.Duration(tk)).Round(0)
	b := &heldBan{end: satAdd(tk, int64(length)), ban: store.Ban{
		Key:     mk.key(),
		Reason:  lim.Reason(),
		Source:  store.SourceAuto,
		Created: created,
		Expires: created.Add(length),
		Offense: offense,
	}}
	sh.bans[bk] = b
	ev.add(store.EventBan, b, tk)
	r := b.result(tk)
	r.Count, r.NewBan = count, true
	return r
}

// offend records an automatic ban of mk at ticks tk and returns its
// number within the offense window, this one included.
func (sh *shard[K]) offend(mk K, tk int64, window time.Duration) int {
	log := sh.offenses[mk]
	if log == nil {
		log = &offenseLog{}
		sh.offenses[mk] = log
	}
	keep := log.times[:0]
	for _, at := range log.times {
		if at > tk-int64(window) {
			keep = append(keep, at)
		}
	}
	log.times = append(keep, tk)
	log.exp = satAdd(tk, int64(window))
	return len(log.times)
}

// satAdd adds two non-negative quantities, stopping at the largest int64
// rather than wrapping around into the past.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// expire deletes bk's ban b, over at ticks tk, and journals it in ev,
// under sh's lock.
func (t *table[K]) expire(sh *shard[K], bk K, b *heldBan, tk int64, ev *eventLog) {
	delete(sh.bans, bk)
	t.dirty.add(bk)
	ev.add(store.EventExpire, b, tk)
}

// setBan writes b on bk at ticks tk, journaled in ev, and deletes the
// counter mk. A ban it replaces that is over is journaled over first.
func (t *table[K]) setBan(mk, bk K, h uint64, b *heldBan, tk int64, ev *eventLog) {
	sh := t.shard(h)
	sh.mu.Lock()
	if old, ok := sh.bans[bk]; ok && !old.live(tk) {
		ev.add(store.EventExpire, old, tk)
	}
	sh.bans[bk] = b
	ev.add(store.EventBan, b, tk)
	if i, ok := sh.counters.find(mk, h); ok {
		sh.counters.remove(i)
	}
	t.dirty.add(bk) // under the lock, as in take
	sh.mu.Unlock()
}

// lift deletes mk's ban at ticks tk, and journals it in ev: lifted if it
// was in force, else over.
func (t *table[K]) lift(mk K, h uint64, tk int64, ev *eventLog) (store.Ban, bool) {
	sh := t.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b, ok := sh.bans[mk]
	if !ok {
		return store.Ban{}, false
	}
	delete(sh.bans, mk)
	t.dirty.add(mk)
	if !b.live(tk) {
		ev.add(store.EventExpire, b, tk)
		return b.ban, false
	}
	ev.add(store.EventLift, b, tk)
	return b.ban, true
}

// bans appends the live bans of namespace ns that f selects.
func (t *table[K]) bans(ns uint64, nsOf func(K) uint64, tk int64, f store.BanFilter, out []store.Ban) []store.Ban {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for k, b := range sh.bans {
			if nsOf(k) == ns && b.live(tk) && f.Match(b.ban) {
				out = append(out, b.ban)
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// inspect reports the counter mk, and the ban and offenses of bk.
func (t *table[K]) inspect(mk, bk K, h uint64, tk int64, lim *store.Limits) store.KeyState {
	sh := t.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var st store.KeyState
	if i, ok := sh.counters.find(mk, h); ok && sh.counters.at(i).exp > tk {
		c := sh.counters.at(i)
		st.Count, st.CountTTL = c.n, time.Duration(c.exp-tk)
	}
	if b, ok := sh.bans[bk]; ok && b.live(tk) {
		bb := b.ban
		st.Ban = &bb
	}
	if log, ok := sh.offenses[bk]; ok {
		for _, at := range log.times {
			if at > tk-int64(lim.OffenseWindow) {
				st.Offenses++
			}
		}
	}
	return st
}

// sweep drops what is over at ticks tk, one shard at a time, so a request
// waits at most for one shard's sweep; a ban over is journaled in evOf
// of its key, and left for the next sweep when that is nil.
func (t *table[K]) sweep(tk int64, evOf func(K) *eventLog) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		sh.counters.sweep(tk)
		for k, b := range sh.bans {
			if !b.live(tk) {
				if ev := evOf(k); ev != nil {
					t.expire(sh, k, b, tk, ev)
				}
			}
		}
		for k, log := range sh.offenses {
			if log.exp <= tk {
				delete(sh.offenses, k)
				t.dirty.add(k)
			}
		}
		sh.mu.Unlock()
	}
}

// dropCounters deletes every counter that inside selects, one shard at a
// time: a range ban's reset of the counters within it.
func (t *table[K]) dropCounters(inside func(K) bool) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		ct := &sh.counters
		if ct.front.n != 0 && inside(ct.front.key) {
			ct.remove(frontIndex)
		}
		for j := 0; j < len(ct.slots); {
			if s := &ct.slots[j]; s.n != 0 && inside(s.key) {
				ct.remove(j) // a later slot may have moved into j: look again
				continue
			}
			j++
		}
		sh.mu.Unlock()
	}
}

// stopNotes stops the notes to dirty under every shard's lock: a change
// noted under a shard's lock (every one is) is then either noted before
// the stop, and written by Close's last flush, or made after it.
func (t *table[K]) stopNotes() {
	for i := range t.shards {
		t.shards[i].mu.Lock()
	}
	t.dirty.stop()
	for i := range t.shards {
		t.shards[i].mu.Unlock()
	}
}

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
