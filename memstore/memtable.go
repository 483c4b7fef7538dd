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
// ticks into times for a new ban's record.
func (t *table[K]) take(mk, bk K, h uint64, tk, n int64, lim *store.Limits, epoch *time.Time) store.Result {
	sh := t.shard(h)
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
			delete(sh.bans, bk)
			t.dirty.add(bk)
		}
	}
	ct := &sh.counters
	i, ok := ct.find(mk, h)
	if n == 0 {
		var r store.Result
		if ok && ct.at(i).exp > tk {
			r.Count = ct.at(i).n
		}
		sh.mu.Unlock()
		return r
	}
	count := n
	if ok {
		if ct.promotes(i, tk) {
			i = ct.promote(i, tk)
		}
		c := ct.at(i)
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
	r := sh.ban(mk, bk, i, tk, count, lim, epoch)
	t.dirty.add(bk) // under the lock, which Close takes to stop the notes
	sh.mu.Unlock()
	return r
}

// ban bans mk, whose counter at index i has just passed BanLimit at ticks
// tk, under the shard's lock. The counter goes, so that a lifted client
// starts again from nothing instead of being banned again on its next
// request.
func (sh *shard[K]) ban(mk, bk K, i int, tk, count int64, lim *store.Limits, epoch *time.Time) store.Result {
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

// setBan writes b on bk and deletes the counter mk.
func (t *table[K]) setBan(mk, bk K, h uint64, b *heldBan) {
	sh := t.shard(h)
	sh.mu.Lock()
	sh.bans[bk] = b
	if i, ok := sh.counters.find(mk, h); ok {
		sh.counters.remove(i)
	}
	t.dirty.add(bk) // under the lock, as in take
	sh.mu.Unlock()
}

func (t *table[K]) lift(mk K, h uint64, tk int64) (store.Ban, bool) {
	sh := t.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b, ok := sh.bans[mk]
	if !ok {
		return store.Ban{}, false
	}
	delete(sh.bans, mk)
	t.dirty.add(mk)
	return b.ban, b.live(tk)
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
// waits at most for one shard's sweep.
func (t *table[K]) sweep(tk int64) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		sh.counters.sweep(tk)
		for k, b := range sh.bans {
			if !b.live(tk) {
				delete(sh.bans, k)
				t.dirty.add(k)
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
