package protect

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go4.org/netipx"
)

// MemoryOptions configure a MemoryStore. The zero value is ready to use.
type MemoryOptions struct {
	// MaxKeys caps the stream counters kept at once [4,194,304]. Under
	// pressure a counter is evicted (an expired one first) to make room;
	// bans and offense histories are never evicted.
	MaxKeys int
	// Shards is the number of independently locked shards, rounded up to
	// a power of two [128].
	Shards int
	// SweepInterval is how often expired entries are swept, one shard at
	// a time so that requests never wait for the whole store [10s]. A
	// negative value turns the background sweep off (expired entries are
	// then dropped only when touched or evicted).
	SweepInterval time.Duration
	// Clock tells the time [time.Now]. Tests inject a fake one.
	Clock func() time.Time
}

// MemoryStore is the Store for one process: sharded, safe for concurrent
// use, bounded, with expired entries swept in the background. Its zero
// value is not usable; call NewMemoryStore.
//
// Counters are keyed by comparable values, not formatted strings, so the
// hot path does not allocate: a tracked address costs well under 128
// bytes of heap, and every key can still be listed.
type MemoryStore struct {
	clock func() time.Time // nil: the real clock, read as time.Since(epoch)
	epoch time.Time
	seed  maphash.Seed
	hseed uint64
	addrs table[addrKey]
	names table[nameKey]

	mu     sync.Mutex // guards spaces and every space's range list
	spaces map[string]*space
	last   atomic.Pointer[space] // the most recently used space: one protector, no map lookup

	stop      chan struct{}
	closeOnce sync.Once
	sweeper   sync.WaitGroup
}

// A space is one namespace of the store.
type space struct {
	name   string
	id     uint64
	ranges atomic.Pointer[rangeSnap] // nil when no range is banned
}

// rangeSnap is an immutable snapshot of a namespace's range bans.
type rangeSnap struct {
	set  *netipx.IPSet
	bans []memBan
}

// addrKey is an address prefix in a namespace: three machine words.
type addrKey struct {
	hi, lo uint64
	meta   uint64 // namespace id << 8 | prefix bits
}

// key returns the public Key an addrKey stands for.
func (k addrKey) key() Key {
	return Key{Prefix: wordKey{hi: k.hi, lo: k.lo, bits: k.meta & 0xff}.prefix()}
}

func (k nameKey) key() Key { return Key{Name: k.name} }

type nameKey struct {
	ns   uint64
	name string
}

type memBan struct {
	ns  uint64
	ban Ban
	exp int64 // ticks; 0 when permanent
}

type offenseLog struct {
	times []int64 // ticks of automatic bans, oldest first
	exp   int64   // the log is forgotten after this
}

// NewMemoryStore returns a memory store and starts its sweeper. Call Close
// to stop it.
func NewMemoryStore(opt MemoryOptions) *MemoryStore {
	if opt.MaxKeys <= 0 {
		opt.MaxKeys = 1 << 22
	}
	if opt.Shards <= 0 {
		opt.Shards = 128
	}
	if opt.SweepInterval == 0 {
		opt.SweepInterval = 10 * time.Second
	}
	epoch := time.Now()
	if opt.Clock != nil {
		epoch = opt.Clock()
	}
	n := 1 << bits.Len(uint(opt.Shards-1))
	per := max(opt.MaxKeys/n, 1)
	s := &MemoryStore{
		clock:  opt.Clock,
		epoch:  epoch,
		seed:   maphash.MakeSeed(),
		spaces: make(map[string]*space),
		stop:   make(chan struct{}),
	}
	s.hseed = maphash.String(s.seed, "protect") | 1
	s.addrs = newTable(n, per, s.hashAddr)
	s.names = newTable(n, per, s.hashName)
	if opt.SweepInterval > 0 {
		s.sweeper.Add(1)
		go s.sweepEvery(opt.SweepInterval)
	}
	return s
}

// Close stops the sweeper. The store keeps answering afterwards.
func (s *MemoryStore) Close() error {
	s.closeOnce.Do(func() { close(s.stop) })
	s.sweeper.Wait()
	return nil
}

// Len returns the number of stream counters held, expired or not.
func (s *MemoryStore) Len() int { return s.addrs.len() + s.names.len() }

// now returns the store's time in ticks: nanoseconds since the store was
// made. On the real clock that is one monotonic clock read (time.Since),
// half the cost of time.Now, and immune to wall clock steps.
func (s *MemoryStore) now() int64 {
	if s.clock == nil {
		return int64(time.Since(s.epoch))
	}
	return int64(s.clock().Sub(s.epoch))
}

// timeAt converts ticks back to a time, for ban records.
func (s *MemoryStore) timeAt(t int64) time.Time {
	return s.epoch.Add(time.Duration(t)).Round(0)
}

// space returns the namespace's state, creating it on first use.
func (s *MemoryStore) space(ns string) *space {
	if sp := s.last.Load(); sp != nil && sp.name == ns {
		return sp
	}
	s.mu.Lock()
	sp, ok := s.spaces[ns]
	if !ok {
		sp = &space{name: ns, id: uint64(len(s.spaces) + 1)}
		s.spaces[ns] = sp
	}
	s.mu.Unlock()
	s.last.Store(sp)
	return sp
}

func (s *MemoryStore) addrKeyOf(sp *space, w wordKey) (addrKey, uint64) {
	k := addrKey{hi: w.hi, lo: w.lo, meta: sp.id<<8 | w.bits}
	return k, s.hashAddr(k)
}

// hashAddr mixes an address key with a per-store seed (multiply-xorshift):
// neighbouring addresses spread over shards and slots, and nobody outside
// can aim a set of addresses at one shard.
func (s *MemoryStore) hashAddr(k addrKey) uint64 {
	h := (k.hi ^ bits.RotateLeft64(k.lo, 29) ^ k.meta) * s.hseed
	h ^= h >> 32
	h *= 0x9e3779b97f4a7c15
	return h ^ h>>29
}

func (s *MemoryStore) nameKeyOf(sp *space, name string) (nameKey, uint64) {
	k := nameKey{ns: sp.id, name: name}
	return k, s.hashName(k)
}

func (s *MemoryStore) hashName(k nameKey) uint64 {
	return maphash.String(s.seed, k.name) ^ k.ns*0x9e3779b97f4a7c15
}

// Take implements Store.
func (s *MemoryStore) Take(_ context.Context, ns string, k Key, addr netip.Addr, lim *Limits) (Result, error) {
	sp := s.space(ns)
	switch {
	case k.Name != "":
		t := s.now()
		if r, banned := sp.ranges.Load().banned(addr, t); banned {
			return r, nil
		}
		mk, h := s.nameKeyOf(sp, k.Name)
		return s.names.take(mk, h, sp.id, s.epoch, t, lim), nil
	case k.Prefix.IsValid():
		return s.takeWords(sp, wordsOf(k.Prefix), addr, lim), nil
	}
	return Result{}, fmt.Errorf("protect: memory store: take: empty key")
}

// takeWords is Take for an address key in a known space: the path every
// counted request of a Protector on a memory store takes.
func (s *MemoryStore) takeWords(sp *space, w wordKey, addr netip.Addr, lim *Limits) Result {
	t := s.now()
	if r, banned := sp.ranges.Load().banned(addr, t); banned {
		return r
	}
	mk, h := s.addrKeyOf(sp, w)
	return s.addrs.take(mk, h, sp.id, s.epoch, t, lim)
}

// banned checks addr against the range bans at ticks t. A nil snapshot
// holds no bans.
func (r *rangeSnap) banned(addr netip.Addr, t int64) (Result, bool) {
	if r == nil || !addr.IsValid() || !r.set.Contains(addr) {
		return Result{}, false
	}
	if b, ok := r.match(addr, t); ok {
		return bannedResult(b, t), true
	}
	return Result{}, false
}

// match returns the range ban covering a that ends last.
func (r *rangeSnap) match(a netip.Addr, t int64) (*memBan, bool) {
	var best *memBan
	for i := range r.bans {
		b := &r.bans[i]
		if !b.ban.Key.Prefix.Contains(a) || (b.exp != 0 && b.exp <= t) {
			continue
		}
		if best == nil || b.exp == 0 || (best.exp != 0 && b.exp > best.exp) {
			best = b
		}
	}
	return best, best != nil
}

// bannedResult answers for ban b. b is never changed once stored (a new
// ban replaces the pointer), so its record can be shared without a copy.
func bannedResult(b *memBan, t int64) Result {
	r := Result{Banned: true, Ban: &b.ban}
	if b.exp != 0 {
		r.BanLeft = time.Duration(b.exp - t)
	}
	return r
}

// AddBan implements Store.
func (s *MemoryStore) AddBan(_ context.Context, ns string, b Ban, length time.Duration) (Ban, error) {
	if b.Key.IsZero() || (b.Range && !b.Key.Prefix.IsValid()) {
		return Ban{}, fmt.Errorf("protect: memory store: ban: empty key")
	}
	t := s.now()
	sp := s.space(ns)
	b.Created = s.timeAt(t)
	b.Expires = time.Time{}
	mb := memBan{ns: sp.id, ban: b}
	if length > 0 {
		b.Expires = b.Created.Add(length)
		mb = memBan{ns: sp.id, ban: b, exp: t + int64(length)}
	}
	if b.Range {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.setRangesLocked(sp, func(old []memBan) []memBan {
			return append(withoutRange(old, b.Key), mb)
		})
		return b, nil
	}
	if b.Key.Name != "" {
		mk, h := s.nameKeyOf(sp, b.Key.Name)
		s.names.setBan(mk, h, mb)
	} else {
		mk, h := s.addrKeyOf(sp, wordsOf(b.Key.Prefix))
		s.addrs.setBan(mk, h, mb)
	}
	return b, nil
}

func withoutRange(bans []memBan, k Key) []memBan {
	out := make([]memBan, 0, len(bans)+1)
	for _, b := range bans {
		if b.ban.Key != k {
			out = append(out, b)
		}
	}
	return out
}

// setRangesLocked replaces sp's range bans with edit(current). s.mu is held.
func (s *MemoryStore) setRangesLocked(sp *space, edit func([]memBan) []memBan) {
	var cur []memBan
	if snap := sp.ranges.Load(); snap != nil {
		cur = snap.bans
	}
	sp.ranges.Store(newRangeSnap(edit(cur)))
}

// newRangeSnap indexes range bans for lookups; nil when there are none.
func newRangeSnap(bans []memBan) *rangeSnap {
	if len(bans) == 0 {
		return nil
	}
	var sb netipx.IPSetBuilder
	for _, b := range bans {
		sb.AddPrefix(b.ban.Key.Prefix)
	}
	set, _ := sb.IPSet() // only valid prefixes are ever added
	return &rangeSnap{set: set, bans: bans}
}

// Lift implements Store.
func (s *MemoryStore) Lift(_ context.Context, ns string, k Key) (Ban, bool, error) {
	sp := s.space(ns)
	t := s.now()
	var lifted Ban
	found := false
	if k.Prefix.IsValid() {
		s.mu.Lock()
		if snap := sp.ranges.Load(); snap != nil {
			for _, b := range snap.bans {
				if b.ban.Key == k && (b.exp == 0 || b.exp > t) {
					lifted, found = b.ban, true
				}
			}
			s.setRangesLocked(sp, func(old []memBan) []memBan { return withoutRange(old, k) })
		}
		s.mu.Unlock()
		mk, h := s.addrKeyOf(sp, wordsOf(k.Prefix))
		if b, ok := s.addrs.lift(mk, h, t); ok {
			lifted, found = b, true
		}
	} else if k.Name != "" {
		mk, h := s.nameKeyOf(sp, k.Name)
		lifted, found = s.names.lift(mk, h, t)
	}
	return lifted, found, nil
}

// Bans implements Store.
func (s *MemoryStore) Bans(ctx context.Context, ns string) ([]Ban, error) {
	out, _ := s.RangeBans(ctx, ns)
	sp := s.space(ns)
	t := s.now()
	out = s.addrs.bans(sp.id, t, out)
	return s.names.bans(sp.id, t, out), nil
}

// RangeBans implements Store.
func (s *MemoryStore) RangeBans(_ context.Context, ns string) ([]Ban, error) {
	var out []Ban
	if snap := s.space(ns).ranges.Load(); snap != nil {
		t := s.now()
		for _, b := range snap.bans {
			if b.exp == 0 || b.exp > t {
				out = append(out, b.ban)
			}
		}
	}
	return out, nil
}

// Inspect implements Store.
func (s *MemoryStore) Inspect(_ context.Context, ns string, k Key, lim *Limits) (KeyState, error) {
	sp := s.space(ns)
	t := s.now()
	var st KeyState
	switch {
	case k.Name != "":
		mk, h := s.nameKeyOf(sp, k.Name)
		st = s.names.inspect(mk, h, t, lim)
	case k.Prefix.IsValid():
		mk, h := s.addrKeyOf(sp, wordsOf(k.Prefix))
		st = s.addrs.inspect(mk, h, t, lim)
		if st.Ban == nil {
			if snap := sp.ranges.Load(); snap != nil {
				for _, b := range snap.bans {
					if b.ban.Key == k && (b.exp == 0 || b.exp > t) {
						bb := b.ban
						st.Ban = &bb
					}
				}
			}
		}
	default:
		return KeyState{}, fmt.Errorf("protect: memory store: inspect: empty key")
	}
	st.Key = k
	return st, nil
}

// sweepEvery sweeps the store every interval until Close.
func (s *MemoryStore) sweepEvery(interval time.Duration) {
	defer s.sweeper.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			s.sweep()
		}
	}
}

// sweep drops every expired counter, ban and offense history. It locks one
// shard at a time, so a request waits at most for one shard's sweep.
func (s *MemoryStore) sweep() {
	t := s.now()
	s.addrs.sweep(t)
	s.names.sweep(t)
	s.mu.Lock()
	for _, sp := range s.spaces {
		snap := sp.ranges.Load()
		if snap == nil {
			continue
		}
		live := 0
		for _, b := range snap.bans {
			if b.exp == 0 || b.exp > t {
				live++
			}
		}
		if live < len(snap.bans) {
			s.setRangesLocked(sp, func(old []memBan) []memBan {
				out := make([]memBan, 0, live)
				for _, b := range old {
					if b.exp == 0 || b.exp > t {
						out = append(out, b)
					}
				}
				return out
			})
		}
	}
	s.mu.Unlock()
}

// A table is a sharded set of counters, bans and offense histories. The
// top bits of a key's hash pick its shard; the counter table uses the
// bottom ones.
type table[K tableKey] struct {
	shards   []shard[K]
	shift    uint
	perShard int
}

type shard[K tableKey] struct {
	mu       sync.Mutex
	counters counterTable[K]
	bans     map[K]*memBan
	offenses map[K]*offenseLog
	_        [24]byte // keep neighbouring shards' locks off one cache line
}

// tableKey is a store-internal key that knows its public Key.
type tableKey interface {
	comparable
	key() Key
}

func newTable[K tableKey](n, perShard int, hash func(K) uint64) table[K] {
	t := table[K]{shards: make([]shard[K], n), shift: uint(64 - bits.Len(uint(n-1))), perShard: perShard}
	for i := range t.shards {
		t.shards[i].counters.hash = hash
		t.shards[i].bans = make(map[K]*memBan)
		t.shards[i].offenses = make(map[K]*offenseLog)
	}
	return t
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
		n += sh.counters.used
		sh.mu.Unlock()
	}
	return n
}

// take is Store.Take for one key, under its shard's lock.
func (t *table[K]) take(mk K, h uint64, ns uint64, epoch time.Time, tk int64, lim *Limits) Result {
	sh := t.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.bans) > 0 {
		if b, ok := sh.bans[mk]; ok {
			if b.exp == 0 || b.exp > tk {
				return bannedResult(b, tk)
			}
			delete(sh.bans, mk)
		}
	}
	ct := &sh.counters
	i, ok := ct.find(mk, h)
	var n int64 = 1
	if ok {
		c := &ct.slots[i]
		if c.exp > tk {
			n = c.n + 1
		}
		c.n, c.exp = n, tk+int64(lim.TTL)
	} else {
		if ct.used >= t.perShard {
			ct.evict(h, tk)
		}
		i = ct.insert(mk, h, n, tk+int64(lim.TTL))
	}
	if lim.BanLimit < 0 || n <= lim.BanLimit {
		return Result{Count: n}
	}
	// Past BanLimit: the counter goes, so that a lifted client starts
	// again from nothing instead of being banned again on its next request.
	ct.remove(i)
	log := sh.offenses[mk]
	if log == nil {
		log = &offenseLog{}
		sh.offenses[mk] = log
	}
	keep := log.times[:0]
	for _, at := range log.times {
		if at > tk-int64(lim.OffenseWindow) {
			keep = append(keep, at)
		}
	}
	log.times = append(keep, tk)
	log.exp = tk + int64(lim.OffenseWindow)
	offense := len(log.times)
	length := BanLength(lim, offense)
	created := epoch.Add(time.Duration(tk)).Round(0)
	b := &memBan{ns: ns, exp: tk + int64(length), ban: Ban{
		Key:     mk.key(),
		Reason:  "stream passed the ban limit of " + strconv.FormatInt(lim.BanLimit, 10) + " requests",
		Source:  SourceAuto,
		Created: created,
		Expires: created.Add(length),
		Offense: offense,
	}}
	sh.bans[mk] = b
	r := bannedResult(b, tk)
	r.Count, r.NewBan = n, true
	return r
}

func (t *table[K]) setBan(mk K, h uint64, b memBan) {
	sh := t.shard(h)
	sh.mu.Lock()
	sh.bans[mk] = &b
	if i, ok := sh.counters.find(mk, h); ok {
		sh.counters.remove(i)
	}
	sh.mu.Unlock()
}

func (t *table[K]) lift(mk K, h uint64, tk int64) (Ban, bool) {
	sh := t.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b, ok := sh.bans[mk]
	if !ok {
		return Ban{}, false
	}
	delete(sh.bans, mk)
	return b.ban, b.exp == 0 || b.exp > tk
}

func (t *table[K]) bans(ns uint64, tk int64, out []Ban) []Ban {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for _, b := range sh.bans {
			if b.ns == ns && (b.exp == 0 || b.exp > tk) {
				out = append(out, b.ban)
			}
		}
		sh.mu.Unlock()
	}
	return out
}

func (t *table[K]) inspect(mk K, h uint64, tk int64, lim *Limits) KeyState {
	sh := t.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var st KeyState
	if i, ok := sh.counters.find(mk, h); ok && sh.counters.slots[i].exp > tk {
		c := sh.counters.slots[i]
		st.Count, st.CountTTL = c.n, time.Duration(c.exp-tk)
	}
	if b, ok := sh.bans[mk]; ok && (b.exp == 0 || b.exp > tk) {
		bb := b.ban
		st.Ban = &bb
	}
	if log, ok := sh.offenses[mk]; ok {
		for _, at := range log.times {
			if at > tk-int64(lim.OffenseWindow) {
				st.Offenses++
			}
		}
	}
	return st
}

func (t *table[K]) sweep(tk int64) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		sh.counters.sweep(tk)
		for k, b := range sh.bans {
			if b.exp != 0 && b.exp <= tk {
				delete(sh.bans, k)
			}
		}
		for k, log := range sh.offenses {
			if log.exp <= tk {
				delete(sh.offenses, k)
			}
		}
		sh.mu.Unlock()
	}
}
