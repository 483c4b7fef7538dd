package memstore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/httpprotect/protect/store"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// A memory store with a state file keeps its bans, lifts, offense
// histories, plan states, journals and bookmarks in one bbolt file
// (crash-safe, one file, pure Go) and restores them when the file is
// opened again.
//
// The request path never touches the file. Where a ban, a lift or an
// offense history changes, the store notes the key in a list (an append
// under a mutex, only on the requests that change a ban, never on those
// that are merely counted); a plan entry that is charged is marked dirty
// once, in a list of its shard. One writer goroutine takes the lists and
// writes the current state of each key it names in one transaction, one
// fsync: group commit. It wakes at a ban's note, so a ban reaches the disk
// as soon as the transaction before it is done (well within
// banWriteBound); plan states it takes every planFlushInterval, so a
// key's thousands of charges a second cost one record write.
//
// Times on disk are absolute (Unix time, by the store's clock). In a run
// the store measures time on the monotonic clock from its epoch, which is
// the clock's reading at open: a step of the wall clock during a run
// changes nothing of that run. At the next open the file's absolute times
// are set against the clock's new reading: a ban ends at the wall time
// it was meant to end at, so a clock that was stepped between two runs
// (forward or back) moves the end of every restored ban by the step, as
// measured in elapsed time. An injected Clock is read the same way.

// planFlushInterval is how often the writer takes the plan states
// changed. Under the one second the design allows for plan state, with
// room for the write.
const planFlushInterval = 500 * time.Millisecond

// lockWait is how long Open waits for the file's lock. A
// process that holds it holds it for its life: waiting longer would only
// delay the error.
const lockWait = 50 * time.Millisecond

// retryDelay is how long the writer waits after a failed write before it
// tries again, so that a full disk costs one attempt at a time.
const retryDelay = time.Second

// maxLoggedSkips bounds the malformed records logged one by one at open;
// the rest are counted.
const maxLoggedSkips = 10

// The buckets of a state file.
var (
	bucketMeta     = []byte("meta")
	bucketBans     = []byte("bans")
	bucketOffenses = []byte("offenses")
	bucketPlans    = []byte("plans")
	bucketJournal  = []byte("journal")   // the journals' events (durablejournal.go)
	bucketMarks    = []byte("bookmarks") // the journals' bookmarks
	metaFormat     = []byte("format")
	// dataBuckets are the buckets of records, all but meta.
	dataBuckets = [][]byte{bucketBans, bucketOffenses, bucketPlans, bucketJournal, bucketMarks}
)

// ErrStateFileLocked is the error of Open on a state file that
// another process holds open (or another store in this process).
var ErrStateFileLocked = errors.New("protect: state file is locked")

// Open returns a memory store that keeps its bans (key and
// range bans, automatic and manual, permanent ones too), lifts, offense
// histories, plan states (quota usage, rate state), journals
// (store.Journal) and their bookmarks (store.Bookmarks) in the file
// opt.Path, made if missing, and restores them from it: a restored ban
// ends when it would have ended, never earlier, never later; one that
// ended while the file was closed is dropped. A journal comes back with
// its events numbered as they were, bounded by opt.JournalLength (the
// oldest dropped), so that a cursor or a bookmark of the run before reads
// on; a bookmark comes back with its expiry. Stream counters are not
// kept: they live for a TTL of seconds.
//
// A ban reaches the file within 100 ms of the decision that wrote it,
// with its journal event, and so does a bookmark; the journal event of a
// ban found over, and a plan state, within a second. No request waits
// for the disk. What a kill -9 loses is what had not reached it then.
// Close writes the rest and closes the file; what it cannot write (a
// full disk) is its error.
//
// One process at a time holds the file: a second open, by another
// process or by this one, fails at once with an error that wraps
// ErrStateFileLocked. A malformed record is logged to opt.Logger and
// skipped; the rest of the file is restored. A damaged file (a page cut
// off or overwritten, a meta page not valid) is moved to
// opt.Path+".damaged-"+time, what its intact pages hold is restored and
// written to a new file, and one error-level line says what was lost. A
// file that is not a state file, or of a later format, is an error.
func Open(opt Options) (*Store, error) {
	if opt.Path == "" {
		return nil, errors.New("protect: Open: Options.Path is empty (New makes a store without a file)")
	}
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	now := time.Now
	if opt.Clock != nil {
		now = opt.Clock
	}
	// The file is checked before bbolt reads it: bbolt panics on a
	// damaged page where no caller can recover.
	pre, err := precheckFile(opt.Path, now())
	var db *bolt.DB
	if err == nil {
		db, err = bolt.Open(opt.Path, 0o600, &bolt.Options{
			Timeout:      lockWait,
			FreelistType: bolt.FreelistMapType,
			// The free list is rebuilt at open instead of written at every
			// commit: each group commit writes fewer pages.
			NoFreelistSync: true,
		})
	}
	if errors.Is(err, errLocked) || errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s is held by another process (one process at a time keeps its state in a file; protectctl reaches a running service through its admin API)", ErrStateFileLocked, opt.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("protect: state file %s: %w", opt.Path, err)
	}
	return openStore(opt, db, pre, log)
}

// openStore restores the store of db, which pre checked, and starts its
// writer.
func openStore(opt Options, db *bolt.DB, pre *precheck, log *slog.Logger) (*Store, error) {
	if err := prepareStateFile(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("protect: state file %s: %w", opt.Path, err)
	}
	if pre.movedTo != "" {
		if err := writeSalvage(db, pre.check); err != nil {
			db.Close()
			return nil, fmt.Errorf("protect: state file %s: damaged (%s), moved to %s, and what it held cannot be written again: %w", opt.Path, pre.check.describe(), pre.movedTo, err)
		}
	}
	s, sweep := newMemoryStore(opt)
	start := time.Now()
	nbans := -1
	if pre.check != nil && pre.movedTo == "" {
		nbans = pre.check.counts[string(bucketBans)]
	}
	st, err := s.restore(db, opt.Path, log, nbans)
	if err != nil {
		db.Close()
		s.Close()
		return nil, fmt.Errorf("protect: state file %s: %w", opt.Path, err)
	}
	pre.report(log, opt.Path, st)
	log.Info("protect: state restored", slog.String("file", opt.Path),
		slog.Int("bans", st.bans), slog.Int("offenses", st.offenses), slog.Int("plans", st.plans),
		slog.Int("events", st.events), slog.Int("bookmarks", st.marks),
		slog.Int("expired", st.expired), slog.Int("skipped", st.skipped),
		slog.Duration("took", time.Since(start)))
	s.journal = newJournal(s, db, opt.Path, log)
	s.addrs.dirty = &s.journal.addrs
	s.names.dirty = &s.journal.names
	for i := range s.plans.shards {
		s.plans.shards[i].durable = true
	}
	go s.journal.run()
	s.startSweeper(sweep)
	return s, nil
}

// prepareStateFile makes the buckets of a new file, and refuses a file of
// another format.
func prepareStateFile(db *bolt.DB) error {
	// A file that is ready needs no write (a commit costs an fsync).
	ready := false
	err := db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return nil
		}
		if v := meta.Get(metaFormat); len(v) != 1 || v[0] != recordVersion {
			return fmt.Errorf("format %x, want %d: not a state file of this version of protect", v, recordVersion)
		}
		ready = true
		for _, b := range dataBuckets {
			ready = ready && tx.Bucket(b) != nil
		}
		return nil
	})
	if err != nil || ready {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		switch v := meta.Get(metaFormat); {
		case v == nil:
			if err := meta.Put(metaFormat, []byte{recordVersion}); err != nil {
				return err
			}
		case len(v) != 1 || v[0] != recordVersion:
			return fmt.Errorf("format %x, want %d: written by another version of protect", v, recordVersion)
		}
		for _, b := range dataBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return beginState(tx).finish()
	})
}

// dirtyKeys lists the table keys whose ban or offenses changed, for the
// writer. A nil *dirtyKeys (a store without a file) takes nothing.
type dirtyKeys[K comparable] struct {
	mu   sync.Mutex
	keys []K
	off  bool // the file is closed: note nothing more
	wake chan struct{}
}

// add notes k and wakes the writer.
func (d *dirtyKeys[K]) add(k K) {
	if d == nil {
		return
	}
	d.mu.Lock()
	if d.off {
		d.mu.Unlock()
		return
	}
	d.keys = append(d.keys, k)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default: // the writer is already woken
	}
}

// stop notes nothing more: a change noted before it returns is taken by
// the next take, one after it is not noted.
func (d *dirtyKeys[K]) stop() {
	d.mu.Lock()
	d.off = true
	d.mu.Unlock()
}

// take returns the keys noted, and leaves spare (emptied) to note more.
func (d *dirtyKeys[K]) take(spare []K) []K {
	d.mu.Lock()
	keys := d.keys
	d.keys = spare[:0]
	d.mu.Unlock()
	return keys
}

// rangeRef names a range ban of one namespace, or its allowlist entry
// on p.
type rangeRef struct {
	ns    uint64
	p     netip.Prefix
	allow bool
}

// journal is the writer of a store's state file.
type journal struct {
	s      *Store
	db     *bolt.DB
	path   string
	log    *slog.Logger
	addrs  dirtyKeys[addrKey]
	names  dirtyKeys[nameKey]
	ranges dirtyKeys[rangeRef]
	marks  dirtyKeys[markRef]
	wake   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	syncs  chan chan error // sync's requests

	// Owned by the writer goroutine.
	pending   []diskOp // ops of a failed write, written before the next
	unwritten int      // records the last failed write held, journal included
	failing   bool
	spareA    []addrKey
	spareN    []nameKey
	spareR    []rangeRef
	spareM    []markRef
	logs      map[uint64]logMark // by namespace id (durablejournal.go)
	spaces    []*memNamespace
	entries   []logEntry

	closeOnce sync.Once
	closeErr  error
}

// diskOp puts val at key in bucket, or deletes key when val is nil;
// with upto, it deletes every key from key up to (not including) upto.
type diskOp struct {
	bucket []byte
	key    []byte
	val    []byte
	upto   []byte
}

func newJournal(s *Store, db *bolt.DB, path string, log *slog.Logger) *journal {
	j := &journal{s: s, db: db, path: path, log: log,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), syncs: make(chan chan error)}
	j.addrs.wake, j.names.wake, j.ranges.wake, j.marks.wake = j.wake, j.wake, j.wake, j.wake
	j.logs = make(map[uint64]logMark)
	return j
}

// noteRange notes a change of the range ban on p in namespace ns.
func (j *journal) noteRange(ns uint64, p netip.Prefix) {
	if j != nil {
		j.ranges.add(rangeRef{ns: ns, p: p})
	}
}

// noteAllow notes a change of the allowlist entry on p in namespace ns.
func (j *journal) noteAllow(ns uint64, p netip.Prefix) {
	if j != nil {
		j.ranges.add(rangeRef{ns: ns, p: p, allow: true})
	}
}

func (j *journal) run() {
	defer close(j.done)
	tick := time.NewTicker(planFlushInterval)
	defer tick.Stop()
	for {
		plans := false
		select {
		case <-j.stop:
			return
		case <-j.wake:
		case <-tick.C:
			plans = true
		case reply := <-j.syncs:
			reply <- j.flush(true)
			continue
		}
		if j.flush(plans) != nil {
			select {
			case <-j.stop:
				return
			case <-time.After(retryDelay):
			}
		}
	}
}

// sync writes everything changed so far, plan states included, and
// returns once it is written: for tests, which must know what the file
// holds before they move their clock.
func (j *journal) sync() error {
	reply := make(chan error)
	select {
	case j.syncs <- reply:
		return <-reply
	case <-j.done:
		return errors.New("protect: state file closed")
	}
}

// close stops the writer, writes what is left and closes the file.
func (j *journal) close() error {
	j.closeOnce.Do(func() {
		close(j.stop)
		<-j.done
		// Note nothing more, then write everything noted.
		j.s.addrs.stopNotes()
		j.s.names.stopNotes()
		j.ranges.stop()
		j.marks.stop()
		for i := range j.s.plans.shards {
			sh := &j.s.plans.shards[i]
			sh.mu.Lock()
			sh.durable = false
			sh.mu.Unlock()
		}
		err := j.flush(true)
		if err != nil {
			// What a failed write leaves is held in memory only, and
			// goes with the process: the caller must hear of it.
			err = fmt.Errorf("protect: state file %s: %d records not written at close: %w", j.path, j.unwritten, err)
		}
		j.closeErr = errors.Join(err, j.db.Close())
	})
	return j.closeErr
}

// flush writes the current state of every key noted since the last
// flush, and with plans every plan entry changed, in one transaction.
func (j *journal) flush(plans bool) error {
	s := j.s
	now := s.now()
	base := s.epoch.UnixNano()
	// A key is noted only once its namespace exists, but the namespace
	// may be younger than this flush: look again when an id is new.
	var names []string
	nsName := func(id uint64) string {
		if int(id) > len(names) {
			s.mu.Lock()
			names = names[:0]
			for _, ns := range s.byID {
				names = append(names, ns.name)
			}
			s.mu.Unlock()
		}
		return names[id-1]
	}

	ops := j.pending
	j.pending = nil
	addrs := j.addrs.take(j.spareA)
	for _, bk := range addrs {
		sh := s.addrs.shard(s.hashAddr(bk))
		ops = j.banOps(ops, sh.state(bk, now), nsName(bk.meta>>8), kindAddr, bk.key(), base)
	}
	j.spareA = addrs
	nms := j.names.take(j.spareN)
	for _, bk := range nms {
		sh := s.names.shard(s.hashName(bk))
		ops = j.banOps(ops, sh.state(bk, now), nsName(bk.ns), kindName, bk.key(), base)
	}
	j.spareN = nms
	rs := j.ranges.take(j.spareR)
	for _, r := range rs {
		if r.allow {
			ops = j.allowOps(ops, r, nsName(r.ns), now, base)
			continue
		}
		s.mu.Lock()
		set := s.byID[r.ns-1].ranges.Load()
		s.mu.Unlock()
		key := appendDiskKey(nil, nsName(r.ns), kindRange, store.Key{Prefix: r.p})
		op := diskOp{bucket: bucketBans, key: key}
		if e, ok := set.Find(r.p, now); ok {
			op.val = appendBanValue(nil, &e.Ban, endNano(e.End, base))
		}
		ops = append(ops, op)
	}
	j.spareR = rs
	// The bookmarks before the journals: a bookmark's event is written
	// with it or before it.
	ops = j.markOps(ops, now, base)
	logs := maps.Clone(j.logs)
	ops = j.eventOps(ops, now, base)
	if plans {
		ops = j.planOps(ops, s.micros(now), nsName)
	}
	if len(ops) == 0 {
		return nil
	}
	err := j.db.Update(func(tx *bolt.Tx) error {
		st := beginState(tx)
		for _, op := range ops {
			if err := st.apply(op); err != nil {
				return err
			}
		}
		return st.finish()
	})
	if err != nil {
		// Kept for the next write: the last state of each record, so
		// that a long outage (a full disk) holds one op per record
		// changed, not one per record per flush. Not the journal's: its
		// marks go back, and the next write reads its events again from
		// the journal, which holds at most JournalLength of them.
		j.logs, j.unwritten = logs, len(ops)
		j.pending = lastOps(slices.DeleteFunc(ops, func(op diskOp) bool { return bytes.Equal(op.bucket, bucketJournal) }))
		if !j.failing {
			j.log.Error("protect: state file write failed; retrying", slog.String("file", j.path), slog.Int("records", len(ops)), slog.Any("error", err))
		}
		j.failing = true
		return err
	}
	if j.failing {
		j.log.Info("protect: state file written again", slog.String("file", j.path))
		j.failing = false
	}
	return nil
}

// allowOps writes the allowlist entry r names as it is now, or deletes
// it: both of its possible records, for the entry is gone and with it
// whether it was a key's or a range's.
func (j *journal) allowOps(ops []diskOp, r rangeRef, ns string, now, base int64) []diskOp {
	s := j.s
	s.mu.Lock()
	set := s.byID[r.ns-1].allows.Load()
	s.mu.Unlock()
	k := store.Key{Prefix: r.p}
	if e, ok := set.Find(r.p, now); ok {
		kind, other := byte(kindAllowKey), byte(kindAllowRange)
		if e.Ban.Range {
			kind, other = other, kind
		}
		return append(ops,
			diskOp{bucket: bucketBans, key: appendDiskKey(nil, ns, kind, k), val: appendBanValue(nil, &e.Ban, endNano(e.End, base))},
			diskOp{bucket: bucketBans, key: appendDiskKey(nil, ns, other, k)})
	}
	return append(ops,
		diskOp{bucket: bucketBans, key: appendDiskKey(nil, ns, kindAllowKey, k)},
		diskOp{bucket: bucketBans, key: appendDiskKey(nil, ns, kindAllowRange, k)})
}

// lastOps returns the last op of ops on each record (bucket and key):
// later ops hold the newer state, and the records of one transaction
// may be written in any order. No op of ops deletes a range (those are
// the journal's, never kept).
func lastOps(ops []diskOp) []diskOp {
	seen := make(map[string]struct{}, len(ops))
	out := make([]diskOp, 0, len(ops))
	for i := len(ops) - 1; i >= 0; i-- {
		op := ops[i]
		id := string(op.bucket) + "\x00" + string(op.key) // no bucket's name holds a NUL
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		out = append(out, op)
	}
	return out
}

// keyState is a key's ban and offenses as the writer copies them.
type keyState struct {
	ban      *heldBan // nil: none in force
	times    []int64
	offenses bool
	exp      int64
}

// state copies bk's ban and offense history at ticks now, under the
// shard's lock. A heldBan is never changed once published: its pointer
// is copy enough.
func (sh *shard[K]) state(bk K, now int64) keyState {
	var st keyState
	sh.mu.Lock()
	if b, ok := sh.bans[bk]; ok && b.live(now) {
		st.ban = b
	}
	if log, ok := sh.offenses[bk]; ok && log.exp > now {
		st.times, st.exp, st.offenses = append([]int64(nil), log.times...), log.exp, true
	}
	sh.mu.Unlock()
	return st
}

// banOps appends the ops that write st for key k of namespace ns.
func (j *journal) banOps(ops []diskOp, st keyState, ns string, kind byte, k store.Key, base int64) []diskOp {
	key := appendDiskKey(nil, ns, kind, k)
	ban := diskOp{bucket: bucketBans, key: key}
	if st.ban != nil {
		ban.val = appendBanValue(nil, &st.ban.ban, endNano(st.ban.end, base))
	}
	off := diskOp{bucket: bucketOffenses, key: key}
	if st.offenses {
		abs := st.times
		for i := range abs {
			abs[i] += base // a time already past: no overflow
		}
		off.val = appendOffenseValue(nil, abs, unixNano(st.exp, base))
	}
	return append(ops, ban, off)
}

// planOps appends the ops that write every plan entry changed or gone,
// each shard's under its lock, at now (µs).
func (j *journal) planOps(ops []diskOp, now int64, nsName func(uint64) string) []diskOp {
	t := &j.s.plans
	var refs []planRef
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		if len(sh.dirty) == 0 {
			sh.mu.Unlock()
			continue
		}
		refs = append(refs[:0], sh.dirty...)
		sh.dirty = sh.dirty[:0]
		type copied struct {
			exp   int64
			slots []planSlot
		}
		states := make([]*copied, len(refs))
		for n, r := range refs {
			if e := sh.entries[r.h]; e != nil && e.key == r.key {
				e.dirty = false
				if exp := e.over(); exp > now {
					states[n] = &copied{exp: exp, slots: append([]planSlot(nil), e.slots...)}
				}
			}
		}
		sh.mu.Unlock()
		for n, r := range refs {
			kind, k := byte(kindName), store.Key{Name: r.key.name}
			if r.key.name == "" {
				kind, k = kindAddr, store.Key{Prefix: wordKey{hi: r.key.hi, lo: r.key.lo, bits: r.key.bits - 1}.prefix()}
			}
			op := diskOp{bucket: bucketPlans, key: appendDiskKey(nil, nsName(r.key.ns), kind, k)}
			if c := states[n]; c != nil {
				op.val = appendPlanValue(nil, c.exp, c.slots)
			}
			ops = append(ops, op)
		}
	}
	return ops
}

// endNano is a ban's end in ticks as Unix ns; 0 (permanent) stays 0.
// An end past what Unix ns can hold (a length that saturated) stays the
// largest int64 rather than wrapping into a negative expiry, which the
// restore would skip as malformed and so lift the ban.
func endNano(end, base int64) int64 {
	if end == 0 {
		return 0
	}
	return unixNano(end, base)
}

// unixNano is ticks t as Unix ns, from the epoch base in Unix ns: the
// largest int64 when the sum would overflow.
func unixNano(t, base int64) int64 {
	if base > 0 && t > math.MaxInt64-base {
		return math.MaxInt64
	}
	return t + base
}
