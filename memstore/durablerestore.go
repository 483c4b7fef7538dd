package memstore

import (
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"github.com/httpprotect/protect/store"
)

// restoreStats counts what a restore read.
type restoreStats struct {
	bans, offenses, plans int
	events, marks         int
	expired, skipped      int
}

// restorer loads a state file into a store that nothing uses yet (no
// sweeper, no writer, no Space), so it takes no shard lock.
type restorer struct {
	s      *Store
	path   string
	log    *slog.Logger
	now    int64 // ticks
	base   int64 // the epoch in Unix ns
	st     restoreStats
	gone   [][2][]byte                   // bucket and key of the expired records, to delete
	runs   map[*memNamespace]restoredRun // the last event read of each journal
	ranges map[*memNamespace][]store.RangeEntry
	allows map[*memNamespace][]store.RangeEntry
	// The last namespace met, and the strings seen: records come sorted
	// by namespace, and most share a few reasons.
	lastNS *memNamespace
	strs   map[string]string
	in     func([]byte) string // intern, made once: a method value allocates
	recent [4]string           // the strings interned last
	next   int                 // the next of recent to replace
	// held is a slab the restored bans are carved from: one allocation
	// for many bans, small enough that a few live bans keep little else.
	held []heldBan
	// addrBans are the address bans read, by shard (insertAddrBans).
	addrBans [][]pendingBan
}

// heldSlab is the number of bans allocated at once by a restore.
const heldSlab = 256

// newHeld returns a zero heldBan from the slab.
func (r *restorer) newHeld() *heldBan {
	if len(r.held) == 0 {
		r.held = make([]heldBan, heldSlab)
	}
	h := &r.held[0]
	r.held = r.held[1:]
	return h
}

// restore loads what db holds into s, drops (and deletes) what is over,
// and skips (and logs) what is malformed.
// nbans is the number of ban records, when the check counted them
// (else -1: bbolt counts them).
func (s *Store) restore(db *bolt.DB, path string, log *slog.Logger, nbans int) (restoreStats, error) {
	r := &restorer{s: s, path: path, log: log, now: s.now(), base: s.epoch.UnixNano(),
		ranges: make(map[*memNamespace][]store.RangeEntry), allows: make(map[*memNamespace][]store.RangeEntry),
		strs: make(map[string]string), runs: make(map[*memNamespace]restoredRun)}
	r.in = r.intern
	err := db.View(func(tx *bolt.Tx) error {
		bans := tx.Bucket(bucketBans)
		if nbans < 0 {
			nbans = bans.Stats().KeyN
		}
		r.presize(nbans)
		if err := bans.ForEach(r.ban); err != nil {
			return err
		}
		if err := tx.Bucket(bucketOffenses).ForEach(r.offense); err != nil {
			return err
		}
		if err := tx.Bucket(bucketPlans).ForEach(r.plan); err != nil {
			return err
		}
		if err := tx.Bucket(bucketJournal).ForEach(r.event); err != nil {
			return err
		}
		return tx.Bucket(bucketMarks).ForEach(r.mark)
	})
	if err != nil {
		return r.st, err
	}
	r.insertAddrBans()
	r.resumeLogs()
	for ns, entries := range r.ranges {
		ns.ranges.Store(store.NewRangeSet(entries))
	}
	for ns, entries := range r.allows {
		ns.allows.Store(store.NewRangeSet(entries))
	}
	if r.st.skipped > maxLoggedSkips {
		log.Warn("protect: state file records skipped", slog.String("file", path), slog.Int("skipped", r.st.skipped))
	}
	if len(r.gone) > 0 {
		err = db.Update(func(tx *bolt.Tx) error {
			st := beginState(tx)
			for _, g := range r.gone {
				if err := st.put(g[0], g[1], nil); err != nil {
					return err
				}
			}
			return st.finish()
		})
		if err != nil {
			// Over records are skipped at every open until one deletes
			// them: a full disk must not keep the store from starting.
			log.Warn("protect: state file: expired records not deleted", slog.String("file", path), slog.Int("records", len(r.gone)), slog.Any("error", err))
		}
	}
	return r.st, nil
}

// presize makes room for n bans to insert, one list per shard.
func (r *restorer) presize(n int) {
	shards := len(r.s.addrs.shards)
	per := n/shards + n/shards/8 + 1
	r.addrBans = make([][]pendingBan, shards)
	for i := range r.addrBans {
		r.addrBans[i] = make([]pendingBan, 0, per)
	}
}

// pendingBan is an address ban read and not yet inserted.
type pendingBan struct {
	k    addrKey
	held *heldBan
}

// insertAddrBans puts the address bans read in their shards' maps, one
// shard at a time and several shards at once: each map is made at its
// size and filled while it is in the cache, rather than a million inserts
// scattered over every shard.
func (r *restorer) insertAddrBans() {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(r.addrBans)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(r.addrBans) {
					return
				}
				list := r.addrBans[i]
				if len(list) == 0 {
					continue
				}
				sh := &r.s.addrs.shards[i]
				m := make(map[addrKey]*heldBan, len(list)+len(sh.bans))
				maps.Copy(m, sh.bans)
				for _, p := range list {
					m[p.k] = p.held
				}
				sh.bans = m
			}
		})
	}
	wg.Wait()
	r.addrBans = nil
}

// skip logs a malformed record, the first few one by one.
func (r *restorer) skip(bucket string, k []byte, err error) {
	r.st.skipped++
	if r.st.skipped <= maxLoggedSkips {
		r.log.Warn("protect: state file record skipped", slog.String("file", r.path),
			slog.String("bucket", bucket), slog.String("key", fmt.Sprintf("%q", k)), slog.Any("error", err))
	}
}

// expire notes a record that is over, to delete once the restore is done.
func (r *restorer) expire(bucket, k []byte) {
	r.st.expired++
	r.gone = append(r.gone, [2][]byte{bucket, append([]byte(nil), k...)})
}

func (r *restorer) namespace(name string) *memNamespace {
	if r.lastNS != nil && r.lastNS.name == name {
		return r.lastNS
	}
	r.lastNS = r.s.namespace(name)
	return r.lastNS
}

// intern returns one string for every equal b: a restore of a million
// bans holds a few reasons, not a million copies. Names are keys of their
// own and are not interned.
func (r *restorer) intern(b []byte) string {
	// Neighbouring records mostly repeat the strings of the one before.
	for _, s := range r.recent {
		if s == string(b) {
			return s
		}
	}
	s, ok := r.strs[string(b)]
	if !ok {
		s = r.add(b)
	}
	r.recent[r.next] = s
	r.next = (r.next + 1) % len(r.recent)
	return s
}

// add interns b, unless too many strings are interned already.
func (r *restorer) add(b []byte) string {
	if len(r.strs) >= maxInterned {
		return string(b)
	}
	s := string(b)
	r.strs[s] = s
	return s
}

// maxInterned bounds the strings a restore interns: reasons and
// operators' names repeat, but a file could hold a different reason on
// every ban.
const maxInterned = 4096

// tick converts Unix ns to the store's ticks.
func (r *restorer) tick(ns int64) int64 { return ns - r.base }

// heldOf is the ban on key (a range with rng) that d, a ban record or an
// event's ban, holds. Its end, in this run's ticks, is where the
// record's absolute time falls: neither shortened nor lengthened by the
// time the file was closed.
func (r *restorer) heldOf(key store.Key, rng bool, d *diskBan) *heldBan {
	held := r.newHeld()
	loc := r.s.epoch.Location()
	held.ban = store.Ban{Key: key, Range: rng, Reason: d.reason, Source: d.source, By: d.by,
		Created: unixTime(d.created, loc), Offense: d.offense}
	if d.end != 0 {
		held.end = r.tick(d.end)
		held.ban.Expires = unixTime(d.end, loc)
	}
	return held
}

func (r *restorer) ban(k, v []byte) error {
	dk, err := decodeDiskKey(k, r.in)
	if err != nil {
		r.skip("bans", k, err)
		return nil
	}
	d, err := decodeBanValue(v, r.in)
	if err != nil {
		r.skip("bans", k, err)
		return nil
	}
	if d.end != 0 && r.tick(d.end) <= r.now {
		r.expire(bucketBans, k)
		return nil
	}
	held := r.heldOf(dk.key, dk.kind == kindRange || dk.kind == kindAllowRange, &d)
	ns := r.namespace(dk.ns)
	r.st.bans++
	switch dk.kind {
	case kindRange:
		r.ranges[ns] = append(r.ranges[ns], store.RangeEntry{Prefix: dk.key.Prefix, End: held.end, Ban: held.ban})
	case kindAllowKey, kindAllowRange:
		r.allows[ns] = append(r.allows[ns], store.RangeEntry{Prefix: dk.key.Prefix, End: held.end, Ban: held.ban})
	case kindAddr:
		bk := r.addrKey(ns, dk.key)
		i := r.s.addrs.shardIndex(r.s.hashAddr(bk))
		r.addrBans[i] = append(r.addrBans[i], pendingBan{k: bk, held: held})
	default:
		bk := nameKey{ns: ns.id, name: dk.key.Name}
		ns.nameBans.Store(true)
		r.s.names.shard(r.s.hashName(bk)).bans[bk] = held
	}
	return nil
}

func (r *restorer) addrKey(ns *memNamespace, k store.Key) addrKey {
	w := wordsOf(k.Prefix)
	return addrKey{hi: w.hi, lo: w.lo, meta: ns.id<<8 | w.bits}
}

func (r *restorer) offense(k, v []byte) error {
	dk, err := decodeDiskKey(k, r.in)
	if err == nil && dk.kind != kindAddr && dk.kind != kindName {
		err = fmt.Errorf("%w: offenses of a range", errRecord)
	}
	if err != nil {
		r.skip("offenses", k, err)
		return nil
	}
	times, exp, err := decodeOffenseValue(v)
	if err != nil {
		r.skip("offenses", k, err)
		return nil
	}
	log := &offenseLog{times: times, exp: r.tick(exp)}
	if log.exp <= r.now {
		r.expire(bucketOffenses, k)
		return nil
	}
	for i := range log.times {
		log.times[i] = r.tick(log.times[i])
	}
	ns := r.namespace(dk.ns)
	r.st.offenses++
	if dk.kind == kindAddr {
		bk := r.addrKey(ns, dk.key)
		r.s.addrs.shard(r.s.hashAddr(bk)).offenses[bk] = log
		return nil
	}
	bk := nameKey{ns: ns.id, name: dk.key.Name}
	r.s.names.shard(r.s.hashName(bk)).offenses[bk] = log
	return nil
}

func (r *restorer) plan(k, v []byte) error {
	dk, err := decodeDiskKey(k, r.in)
	if err == nil && dk.kind != kindAddr && dk.kind != kindName {
		err = fmt.Errorf("%w: plan state of a range", errRecord)
	}
	if err != nil {
		r.skip("plans", k, err)
		return nil
	}
	exp, slots, err := decodePlanValue(v)
	if err != nil {
		r.skip("plans", k, err)
		return nil
	}
	if exp <= r.s.micros(r.now) {
		r.expire(bucketPlans, k)
		return nil
	}
	ns := r.namespace(dk.ns)
	for i := range slots {
		slots[i].name = r.intern([]byte(slots[i].name))
	}
	// The entry's hash is the one TakePlan computes: its counter key's.
	var h uint64
	var pk planKey
	if dk.kind == kindAddr {
		mk := r.addrKey(ns, dk.key)
		pk = planKey{ns: ns.id, hi: mk.hi, lo: mk.lo, bits: mk.meta&0xff + 1}
		h = r.s.hashAddr(mk)
	} else {
		pk = planKey{ns: ns.id, name: dk.key.Name}
		h = r.s.hashName(nameKey{ns: ns.id, name: dk.key.Name})
	}
	r.st.plans++
	r.s.plans.shard(h).entries[h] = &planEntry{key: pk, slots: slots}
	return nil
}
