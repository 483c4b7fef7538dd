package memstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/bits"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpprotect/protect/store"
)

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// MaxKeys caps the stream counters kept at once [4,194,304], and
	// apart from them the keys with plan state. Under pressure a counter
	// (or a key's plan state) is evicted to make room: an expired one
	// first, else the lowest count; a counter past MaxRequests only when
	// no other is within it. A flood of fresh keys thus evicts its own
	// kind and cannot reset a busy client's count. Bans and offense
	// histories are never evicted.
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
	// Path names the state file that keeps bans, lifts, offense
	// histories, plan state, journals and bookmarks across restarts
	// (see Open, which opens it; New ignores it) [none: memory only].
	Path string
	// JournalLength caps the events each ban namespace's journal keeps
	// (Space.Events, store.Journal), the oldest going first [100,000]. An
	// event takes 24 bytes, and keeps the ban it is about (192 bytes and
	// its strings, shared by that ban's events) once the ban is lifted or
	// over: 120 bytes an event for bans written and lifted
	// (TestJournalBytes), at most some 22 MB a ban namespace at the
	// default. With a state file the file keeps as many, and an open
	// with a smaller JournalLength drops the oldest.
	JournalLength int
	// JournalAge is how long the journal keeps an event [7 days].
	JournalAge time.Duration
	// Logger receives what the state file's reader and writer report:
	// a malformed record skipped, a write that failed [slog.Default()].
	Logger *slog.Logger
}

// Store is the Store for one process: sharded, safe for concurrent
// use, bounded, with expired entries swept in the background. Its zero
// value is not usable; call New, or Open for one
// whose bans and plan state survive restarts in a file.
//
// Counters are keyed by comparable values, not formatted strings, so the
// hot path does not allocate and a tracked address holds no string of
// its own on the heap, and every key can still be listed.
type Store struct {
	clock  func() time.Time // nil: the real clock, through coarse
	coarse *coarseClock
	epoch  time.Time
	seed   maphash.Seed
	hseed  uint64
	addrs  table[addrKey]
	names  table[nameKey]
	plans  planTable // plan states (memplan.go)

	mu     sync.Mutex // guards spaces, byID and every namespace's range set
	spaces map[string]*memNamespace
	byID   []*memNamespace // by id - 1

	journalLength int
	journalAge    time.Duration

	journal *journal // the state file's writer; nil in memory only (durable.go)

	stop      chan struct{}
	closeOnce sync.Once
	sweeper   sync.WaitGroup
}

// A memNamespace is one namespace of the store, shared by every Space
// bound to it: as a Namespace its id marks counters and plan states, as a
// BanNamespace it marks bans and offenses and holds the range bans.
type memNamespace struct {
	id     uint64
	name   string
	ranges atomic.Pointer[rangeBans]      // nil when no range is banned
	allows atomic.Pointer[store.RangeSet] // nil when nothing is allowed (allowlist.go)
	// events is the journal of the namespace's bans (journal.go).
	events *eventLog
	marks  bookmarks // the journal's readers' bookmarks (bookmarks.go)
	// nameBans is set once a consumer key of the ban namespace has been
	// banned, and never cleared: until then a plan's decision for a
	// consumer need not look for a ban (memplan.go).
	nameBans atomic.Bool

	// Guarded by the store's mu: the Limits the namespace's counters were
	// first bound to, and those last published.
	lim, published  store.Limits
	bound, isPublic bool
}

// addrKey is an address prefix in a namespace: three machine words.
type addrKey struct {
	hi, lo uint64
	meta   uint64 // namespace id << 8 | prefix bits
}

func (k addrKey) key() store.Key {
	return store.Key{Prefix: wordKey{hi: k.hi, lo: k.lo, bits: k.meta & 0xff}.prefix()}
}

type nameKey struct {
	ns   uint64
	name string
}

func (k nameKey) key() store.Key { return store.Key{Name: k.name} }

// New returns a memory store and starts its sweeper. Call Close
// to stop it. It keeps nothing in a file, whatever opt.Path says: see
// Open.
func New(opt Options) *Store {
	s, sweep := newMemoryStore(opt)
	s.startSweeper(sweep)
	return s
}

// newMemoryStore makes a store, empty and without its sweeper, and
// returns the sweep interval in force.
func newMemoryStore(opt Options) (*Store, time.Duration) {
	if opt.MaxKeys <= 0 {
		opt.MaxKeys = 1 << 22
	}
	if opt.Shards <= 0 {
		opt.Shards = 128
	}
	if opt.SweepInterval == 0 {
		opt.SweepInterval = 10 * time.Second
	}
	if opt.JournalLength <= 0 {
		opt.JournalLength = defaultJournalLength
	}
	if opt.JournalAge <= 0 {
		opt.JournalAge = defaultJournalAge
	}
	epoch := time.Now()
	if opt.Clock != nil {
		epoch = opt.Clock()
	}
	n := 1 << bits.Len(uint(opt.Shards-1))
	per := max(opt.MaxKeys/n, 1)
	s := &Store{
		clock:  opt.Clock,
		epoch:  epoch,
		seed:   maphash.MakeSeed(),
		spaces: make(map[string]*memNamespace),
		stop:   make(chan struct{}),

		journalLength: opt.JournalLength,
		journalAge:    opt.JournalAge,
	}
	s.coarse = newCoarseClock(epoch)
	s.hseed = maphash.String(s.seed, "protect") | 1
	s.addrs = newTable(n, per, s.hashAddr)
	s.names = newTable(n, per, s.hashName)
	s.plans = newPlanTable(n, per)
	return s, opt.SweepInterval
}

// startSweeper starts sweeping every interval, unless it is negative.
func (s *Store) startSweeper(interval time.Duration) {
	if interval > 0 {
		s.sweeper.Add(1)
		go s.sweepEvery(interval)
	}
}

// Close stops the sweeper and the clock's refresher, and for a store
// with a state file writes what is not yet written and closes the file.
// The store keeps answering afterwards, reading the clock on every call;
// what changes then is not written.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.stop) })
	s.sweeper.Wait()
	s.coarse.close()
	if s.journal != nil {
		return s.journal.close()
	}
	return nil
}

// Len returns the number of stream counters held, expired or not.
func (s *Store) Len() int { return s.addrs.len() + s.names.len() }

// Space implements Store. It fails on limits no store can apply, and on
// a Namespace bound to other Limits.
func (s *Store) Space(scope store.Scope) (store.Space, error) {
	if err := scope.Limits.Check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.namespace(scope.Namespace)
	if err := store.LimitsDiffer(scope.Namespace, ns.lim, ns.bound, scope.Limits); err != nil {
		return nil, err
	}
	ns.lim, ns.bound = scope.Limits, true
	return &memSpace{s: s, ns: ns, bns: s.namespace(banNamespace(scope)), lim: scope.Limits}, nil
}

// Published implements Store.
func (s *Store) Published(_ context.Context, namespace string) (store.Limits, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ns, ok := s.spaces[namespace]; ok && ns.isPublic {
		return ns.published, true, nil
	}
	return store.Limits{}, false, nil
}

// Publish implements Space.
func (sp *memSpace) Publish(context.Context) error {
	sp.s.mu.Lock()
	sp.ns.published, sp.ns.isPublic = sp.lim, true
	sp.s.mu.Unlock()
	return nil
}

// namespace returns the namespace called name, made on first use. s.mu
// must be held.
func (s *Store) namespace(name string) *memNamespace {
	ns, ok := s.spaces[name]
	if !ok {
		ns = &memNamespace{id: uint64(len(s.spaces) + 1), name: name, events: newEventLog(s.journalLength, s.journalAge, s.journalStart())}
		s.spaces[name] = ns
		s.byID = append(s.byID, ns)
	}
	return ns
}

// now returns the store's time in ticks: nanoseconds since the store was
// made, by the monotonic clock (immune to wall clock steps), to within a
// millisecond (see coarseClock).
func (s *Store) now() int64 {
	if s.clock == nil { // the real clock, the common case
		return s.coarse.now()
	}
	return s.injected()
}

// injected is now on an injected clock.
func (s *Store) injected() int64 { return int64(s.clock().Sub(s.epoch)) }

// timeAt converts ticks back to a time, for ban records.
func (s *Store) timeAt(t int64) time.Time {
	return s.epoch.Add(time.Duration(t)).Round(0)
}

// hashAddr mixes an address key with a per-store seed (multiply-xorshift):
// neighbouring addresses spread over shards and slots, and nobody outside
// can aim a set of addresses at one shard. The namespace changes only the
// low half (nsSalt), which picks a slot, never a shard: a key's counter
// and its ban in another namespace share one shard's lock.
func (s *Store) hashAddr(k addrKey) uint64 {
	h := (k.hi ^ bits.RotateLeft64(k.lo, 29) ^ k.meta&0xff) * s.hseed
	h ^= h >> 32
	h *= 0x9e3779b97f4a7c15
	return h ^ h>>29 ^ nsSalt(k.meta>>8)
}

func (s *Store) hashName(k nameKey) uint64 {
	return maphash.String(s.seed, k.name) ^ nsSalt(k.ns)
}

// nsSalt spreads the keys of namespace id over the low 32 bits of a hash:
// the bits that place a counter in its table and a plan entry in its map,
// below the ones that pick a shard.
func nsSalt(id uint64) uint64 { return id * 0x9e3779b97f4a7c15 & (1<<32 - 1) }

// sweepEvery sweeps the store every interval until Close.
func (s *Store) sweepEvery(interval time.Duration) {
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

// sweep drops every expired counter, ban and offense history.
func (s *Store) sweep() {
	t := s.now()
	// The journals of the namespaces made so far: a ban of a younger one
	// waits for the next sweep.
	s.mu.Lock()
	byID := append([]*memNamespace(nil), s.byID...)
	s.mu.Unlock()
	s.addrs.sweep(t, func(k addrKey) *eventLog { return eventsOf(byID, k.meta>>8) })
	s.names.sweep(t, func(k nameKey) *eventLog { return eventsOf(byID, k.ns) })
	s.plans.sweep(s.micros(t))
	s.mu.Lock()
	for _, ns := range s.spaces {
		s.sweepSet(ns, &ns.ranges, t, store.EventExpire, s.journal.noteRange)
		s.sweepSet(ns, &ns.allows, t, store.EventAllowExpire, s.journal.noteAllow)
	}
	s.mu.Unlock()
}

// sweepSet drops the entries of ns's range bans or allowlist (set) over
// at ticks t, then journals the end of each as kind and notes it for the
// state file: the set first, so that a reader that finds the event never
// finds the entry. The caller holds s.mu.
func (s *Store) sweepSet(ns *memNamespace, set *atomic.Pointer[store.RangeSet], t int64, kind store.EventKind, note func(ns uint64, p netip.Prefix)) {
	old := set.Load()
	swept := old.Swept(t)
	if swept == old {
		return
	}
	set.Store(swept)
	for _, e := range old.Without(netip.Prefix{}) {
		if !e.Live(t) {
			ns.events.add(kind, &heldBan{ban: e.Ban, end: e.End}, t)
			note(ns.id, e.Prefix)
		}
	}
}

// eventsOf is the journal of namespace id in byID, nil if byID does not
// hold it.
func eventsOf(byID []*memNamespace, id uint64) *eventLog {
	if id == 0 || id > uint64(len(byID)) {
		return nil
	}
	return byID[id-1].events
}

// memSpace is a Store bound to one Scope.
type memSpace struct {
	s   *Store
	ns  *memNamespace // counters and plan states
	bns *memNamespace // bans and offenses; ns itself when the two are one
	lim store.Limits
}

// Local implements LocalSpace: the space answers from memory, so it
// cannot hang, so its calls need no deadline and no circuit breaker.
func (*memSpace) Local() bool { return true }

// addrKey returns p's counter key, its ban key (the same but for the
// namespace) and the counter's hash, whose shard both share.
func (sp *memSpace) addrKey(p netip.Prefix) (mk, bk addrKey, h uint64) {
	// wordsOf and hashAddr, written out: every counted address takes
	// this step (TestAddrKeyHash keeps the two the same).
	var hi, lo uint64
	if a := p.Addr(); a.Is4() {
		b := a.As4()
		lo = 0xffff<<32 | uint64(binary.BigEndian.Uint32(b[:]))
	} else {
		b := a.As16()
		hi, lo = binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	}
	n := uint64(p.Bits())
	mk = addrKey{hi: hi, lo: lo, meta: sp.ns.id<<8 | n}
	bk = mk
	bk.meta = sp.bns.id<<8 | n
	h = (hi ^ bits.RotateLeft64(lo, 29) ^ n) * sp.s.hseed
	h ^= h >> 32
	h *= 0x9e3779b97f4a7c15
	return mk, bk, h ^ h>>29 ^ sp.ns.id*0x9e3779b97f4a7c15&(1<<32-1)
}

// nameKey is addrKey for a name.
func (sp *memSpace) nameKey(name string) (mk, bk nameKey, h uint64) {
	mk = nameKey{ns: sp.ns.id, name: name}
	bk = nameKey{ns: sp.bns.id, name: name}
	return mk, bk, sp.s.hashName(mk)
}

// Take implements Space.
func (sp *memSpace) Take(_ context.Context, k store.Key, addr netip.Addr, n int64) (store.Result, error) {
	t := sp.s.now()
	var r store.Result
	if al := sp.bns.allows.Load(); al != nil && allowed(al, addr, t) { // nothing allowed: the common case, one compare
		return store.Result{Allowed: true}, nil
	}
	if rb := sp.bns.ranges.Load(); rb != nil && lookupRange(rb, addr, t, &r) { // no range bans: the common case, one compare
		return r, nil
	}
	switch {
	case k.Prefix.IsValid():
		mk, bk, h := sp.addrKey(k.Prefix)
		r := sp.s.addrs.take(mk, bk, h, t, n, &sp.lim, &sp.s.epoch, sp.bns.events)
		if r.NewBan {
			sp.unlessAllowed(k, addr, &r)
		}
		return r, nil
	case k.Name != "":
		mk, bk, h := sp.nameKey(k.Name)
		r := sp.s.names.take(mk, bk, h, t, n, &sp.lim, &sp.s.epoch, sp.bns.events)
		if r.NewBan {
			sp.bns.nameBans.Store(true)
		}
		return r, nil
	}
	return store.Result{}, store.ErrEmptyKey
}

// AddBan implements Space.
func (sp *memSpace) AddBan(_ context.Context, b store.Ban, length time.Duration) (store.Ban, error) {
	b, err := store.CheckBan(b)
	if err != nil {
		return store.Ban{}, err
	}
	t := sp.s.now()
	if al := sp.bns.allows.Load(); al != nil && b.Key.Prefix.IsValid() && covers(al, b.Key.Prefix, t) {
		return store.Ban{}, fmt.Errorf("memstore: ban %s: %w", b.Key, store.ErrAllowed)
	}
	b.Created, b.Expires = sp.s.timeAt(t), time.Time{}
	held := &heldBan{ban: b}
	if length > 0 {
		held.end = satAdd(t, int64(length))
		held.ban.Expires = sp.s.timeAt(held.end)
	}
	switch {
	case b.Range:
		sp.s.mu.Lock()
		old := sp.bns.ranges.Load()
		if e, ok := rangeEntry(old, b.Key.Prefix); ok && !e.Live(t) {
			sp.bns.events.add(store.EventExpire, &heldBan{ban: e.Ban, end: e.End}, t)
		}
		sp.bns.ranges.Store(old.With(store.RangeEntry{Prefix: b.Key.Prefix, End: held.end, Ban: held.ban}))
		sp.bns.events.add(store.EventBan, held, t)
		sp.s.mu.Unlock()
		sp.s.journal.noteRange(sp.bns.id, b.Key.Prefix)
		// As a key ban does, an operator's range ban resets the counters
		// within it, so that a lifted range starts from nothing. A walk
		// of the whole table, which an operator's ban can afford and a
		// request (escalation) cannot, and needs not: the keys whose bans
		// caused it were reset by those bans.
		if b.Source != store.SourceManual {
			break
		}
		id, rng := sp.ns.id, b.Key.Prefix
		sp.s.addrs.dropCounters(func(k addrKey) bool {
			return k.meta>>8 == id && (store.BanFilter{Within: rng}).Match(store.Ban{Key: k.key()})
		})
	case b.Key.Prefix.IsValid():
		mk, bk, h := sp.addrKey(b.Key.Prefix)
		sp.s.addrs.setBan(mk, bk, h, held, t, sp.bns.events)
	default:
		mk, bk, h := sp.nameKey(b.Key.Name)
		sp.bns.nameBans.Store(true)
		sp.s.names.setBan(mk, bk, h, held, t, sp.bns.events)
	}
	return held.ban, nil
}

// Lift implements Space.
func (sp *memSpace) Lift(_ context.Context, k store.Key) (store.Ban, bool, error) {
	t := sp.s.now()
	if k.Name != "" {
		_, bk, h := sp.nameKey(k.Name)
		b, ok := sp.s.names.lift(bk, h, t, sp.bns.events)
		return b, ok, nil
	}
	if !k.Prefix.IsValid() {
		return store.Ban{}, false, store.ErrEmptyKey
	}
	var lifted store.Ban
	found := false
	sp.s.mu.Lock()
	if r := sp.bns.ranges.Load(); r != nil {
		// The set goes before the event is written: a reader that finds
		// the event (a bouncer's place past it) must not then list the
		// range, which no later event would take back.
		sp.bns.ranges.Store(store.NewRangeSet(r.Without(k.Prefix)))
		if e, ok := rangeEntry(r, k.Prefix); ok {
			kind := store.EventExpire
			if e.Live(t) {
				lifted, found, kind = e.Ban, true, store.EventLift
			}
			sp.bns.events.add(kind, &heldBan{ban: e.Ban, end: e.End}, t)
		}
	}
	sp.s.mu.Unlock()
	sp.s.journal.noteRange(sp.bns.id, k.Prefix)
	_, bk, h := sp.addrKey(k.Prefix)
	if b, ok := sp.s.addrs.lift(bk, h, t, sp.bns.events); ok {
		lifted, found = b, true
	}
	return lifted, found, nil
}

// Bans implements Space.
func (sp *memSpace) Bans(_ context.Context, f store.BanFilter) ([]store.Ban, error) {
	t := sp.s.now()
	out := rangeList(sp.bns.ranges.Load(), t, f, nil)
	if f.RangesOnly {
		return out, nil
	}
	id := sp.bns.id
	out = sp.s.addrs.bans(id, func(k addrKey) uint64 { return k.meta >> 8 }, t, f, out)
	return sp.s.names.bans(id, func(k nameKey) uint64 { return k.ns }, t, f, out), nil
}

// Inspect implements Space.
func (sp *memSpace) Inspect(_ context.Context, k store.Key) (store.KeyState, error) {
	t := sp.s.now()
	var st store.KeyState
	switch {
	case k.Name != "":
		mk, bk, h := sp.nameKey(k.Name)
		st = sp.s.names.inspect(mk, bk, h, t, &sp.lim)
	case k.Prefix.IsValid():
		mk, bk, h := sp.addrKey(k.Prefix)
		st = sp.s.addrs.inspect(mk, bk, h, t, &sp.lim)
		if e, ok := sp.bns.ranges.Load().Find(k.Prefix, t); ok && st.Ban == nil {
			bb := e.Ban
			st.Ban = &bb
		}
	default:
		return store.KeyState{}, store.ErrEmptyKey
	}
	st.Key, st.Usage = k, sp.planUsage(k)
	return st, nil
}

// banNamespace is where scope's bans live: BanNamespace, or Namespace
// when that is empty.
func banNamespace(scope store.Scope) string {
	if scope.BanNamespace != "" {
		return scope.BanNamespace
	}
	return scope.Namespace
}

// RangeBans implements store.RangeBanCounter.
func (sp *memSpace) RangeBans() int { return sp.bns.ranges.Load().Len(sp.s.now()) }
