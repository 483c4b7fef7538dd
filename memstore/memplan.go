package memstore

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/httpprotect/protect/store"
)

// The memory store's plan states: per key, the state of each limit it has
// been charged under, by limit name. All the limits of one key sit in one
// entry of one shard, so one lock makes a whole plan's decision atomic;
// the stream counter and the bans, in their own tables, are read and
// counted under that lock too.

// planTable is the sharded map from keys to plan entries. It is bounded
// (perShard entries per shard; under pressure an expired entry goes first,
// else any) and swept.
type planTable struct {
	shards   []planShard
	shift    uint
	perShard int
}

type planShard struct {
	mu sync.Mutex
	// entries are keyed by the key's 64-bit hash, seeded per store: a Go
	// map hashes a uint64 much faster than a key holding a string. Each
	// entry holds its key; two keys of one hash (which nobody can aim
	// at) take turns in one entry.
	entries map[uint64]*planEntry
	// dirty lists the entries changed or gone since the state file's
	// writer last took them; only with a state file.
	dirty   []planRef
	durable bool // a state file keeps the plan states: list the changes
	// 64 bytes a shard, so that no two shards' locks share a cache line
	// (TestShardSize).
	_ [23]byte
}

// planRef names a plan entry for the state file's writer: the entry at h
// if it still holds key, else a record to delete.
type planRef struct {
	h   uint64
	key planKey
}

// planKey is a counting key in a namespace: a name, or an address prefix
// as words (bits holds the prefix length plus one, so that no prefix key
// equals a name key).
type planKey struct {
	ns     uint64
	hi, lo uint64
	bits   uint64
	name   string
}

// planEntry is one key's state under its plans.
type planEntry struct {
	key   planKey
	slots []planSlot
	dirty bool // listed in its shard's dirty, not yet taken by the writer
}

// planSlot is the state of one limit, by name: a rate's TAT (a, in µs)
// and remainder (b), or a quota's count (a) in the window that ends at b
// (µs).
type planSlot struct {
	name  string
	quota store.QuotaPeriod // 0: a rate
	a, b  int64
}

// over is when the entry's states no longer matter (µs since the Unix
// epoch): when its last slot is over. It is worked out when asked, by the
// sweep and eviction, rather than kept, so that a charge writes only its
// slots.
func (e *planEntry) over() int64 {
	var t int64
	for i := range e.slots {
		t = max(t, e.slots[i].over())
	}
	return t
}

// over is when the slot's state no longer matters: the rate's bucket is
// full, the quota's window has ended.
func (sl *planSlot) over() int64 {
	switch {
	case sl.quota != 0:
		return sl.b
	case sl.b > 0: // a TAT part of a microsecond past a
		return sl.a + 1
	}
	return sl.a
}

func newPlanTable(n, perShard int) planTable {
	t := planTable{shards: make([]planShard, n), shift: 64, perShard: perShard}
	for n > 1 {
		n >>= 1
		t.shift--
	}
	for i := range t.shards {
		t.shards[i].entries = make(map[uint64]*planEntry)
	}
	return t
}

func (t *planTable) shard(h uint64) *planShard {
	if t.shift == 64 {
		return &t.shards[0]
	}
	return &t.shards[h>>t.shift]
}

// micros converts the store's ticks to µs since the Unix epoch: the
// plans' calendar needs the wall time, which ticks count from the store's
// epoch.
func (s *Store) micros(t int64) int64 {
	return (s.epoch.UnixNano() + t) / int64(time.Microsecond)
}

// TakePlan implements Space. Under the lock of k's plan shard it checks
// the bans and counts the stream (as Take does, in k's counter shard),
// then decides and charges every limit: a plan's whole step is atomic.
// The key is hashed once for both tables.
func (sp *memSpace) TakePlan(_ context.Context, k store.Key, addr netip.Addr, plan *store.Plan, cost int64, stream bool) (res store.PlanResult, err error) {
	if err := store.CheckTakePlan(k, plan, cost); err != nil {
		return res, err
	}
	t := sp.s.now()
	if al := sp.bns.allows.Load(); al != nil && allowed(al, addr, t) {
		res.Allowed, res.Decider = true, -1
		return res, nil
	}
	if addr.IsValid() {
		if rangeBanned(sp.bns.ranges.Load(), addr, t, &res.Result) {
			res.Decider = -1
			return res, nil
		}
	}
	var n int64
	if stream {
		n = cost
	}
	var (
		pk planKey
		h  uint64
		sh *planShard
	)
	if k.Prefix.IsValid() {
		var mk, bk addrKey
		mk, bk, h = sp.addrKey(k.Prefix)
		pk = planKey{ns: sp.ns.id, hi: mk.hi, lo: mk.lo, bits: mk.meta&0xff + 1}
		sh = sp.s.plans.shard(h)
		sh.mu.Lock()
		res.Result = sp.s.addrs.take(mk, bk, h, t, n, &sp.lim, &sp.s.epoch, sp.bns.events)
	} else {
		var mk, bk nameKey
		mk, bk, h = sp.nameKey(k.Name)
		pk = planKey{ns: sp.ns.id, name: k.Name}
		sh = sp.s.plans.shard(h)
		sh.mu.Lock()
		// A consumer that nothing in the namespace ever banned has no ban
		// to find: skip the counter shard's lock.
		if stream || sp.bns.nameBans.Load() {
			res.Result = sp.s.names.take(mk, bk, h, t, n, &sp.lim, &sp.s.epoch, sp.bns.events)
			if res.NewBan {
				sp.bns.nameBans.Store(true)
			}
		}
	}
	if !stream {
		res.Count = 0 // a consumer's stream is not this call's business
	}
	if res.Banned() {
		sh.mu.Unlock()
		res.Decider = -1
		if res.NewBan && k.Prefix.IsValid() {
			sp.unlessAllowed(k, addr, &res.Result)
		}
		return res, nil
	}
	now := sp.s.micros(t)
	var raw [store.MaxPlanLimits]store.LimitOutcome
	sp.s.plans.decide(sh, &pk, h, plan, now, cost, &raw)
	// Filled before the unlock, whose atomic write waits for these
	// stores anyway: filled after it, the caller's copy of res reads
	// them back while they are still on their way, and stalls.
	res.Fill(plan, now, cost, &raw)
	sh.mu.Unlock()
	return res, nil
}

// decide decides and charges plan for pk (of hash h) at now (µs), under
// sh's lock, leaving each limit's outcome in raw.
func (t *planTable) decide(sh *planShard, pk *planKey, h uint64, plan *store.Plan, now, cost int64, raw *[store.MaxPlanLimits]store.LimitOutcome) {
	e := sh.entries[h]
	if e != nil && e.key != *pk {
		e = nil // another key of the same hash: this one starts afresh
	}
	all := true
	var slots [store.MaxPlanLimits]*planSlot // for charge: each limit's slot, nil for none
	for i := range plan.Len() {
		var held store.LimitOutcome
		ok := false
		if e != nil {
			sl := e.find(plan, i)
			slots[i] = sl
			if sl != nil && sl.quota == plan.Spec(i).Quota {
				held, ok = store.LimitOutcome{A: sl.a, B: sl.b}, true
			}
		}
		raw[i] = plan.Decide(i, now, cost, held, ok)
		all = all && raw[i].Fits
	}
	if all && cost > 0 {
		t.charge(sh, pk, h, e, plan, now, cost, raw, &slots)
	}
}

// charge charges cost to every limit of plan, from the states in raw,
// and leaves the new states in raw. slots holds the slot decide found for
// each limit of e, nil for none. It is the only place that allocates: a
// key's first charge, or its first under a plan with new limit names.
func (t *planTable) charge(sh *planShard, pk *planKey, h uint64, e *planEntry, plan *store.Plan, now, cost int64, raw *[store.MaxPlanLimits]store.LimitOutcome, slots *[store.MaxPlanLimits]*planSlot) {
	if e == nil {
		if len(sh.entries) >= t.perShard {
			sh.evict(now)
		}
		if old := sh.entries[h]; old != nil && sh.durable {
			sh.dirty = append(sh.dirty, planRef{h: h, key: old.key}) // replaced: its record goes
		}
		e = newPlanEntry(*pk, plan.Len())
		sh.entries[h] = e
	}
	added := false // add may move e's slots: those found before are stale
	for i := range plan.Len() {
		sl := slots[i]
		if sl == nil || added {
			if sl = e.find(plan, i); sl == nil {
				sl, added = e.add(plan, i, now), true
			}
		}
		raw[i] = plan.Charge(i, now, cost, raw[i])
		sl.quota, sl.a, sl.b = plan.Spec(i).Quota, raw[i].A, raw[i].B
	}
	if sh.durable && !e.dirty {
		e.dirty = true
		sh.dirty = append(sh.dirty, planRef{h: h, key: *pk})
	}
}

// find returns the slot of plan's i-th limit, or nil.
func (e *planEntry) find(plan *store.Plan, i int) *planSlot {
	name := plan.Spec(i).Name
	if i < len(e.slots) && e.slots[i].name == name { // the plan's own order: the usual case
		return &e.slots[i]
	}
	for j := range e.slots {
		if e.slots[j].name == name {
			return &e.slots[j]
		}
	}
	return nil
}

// newPlanEntry makes an entry with room for n slots. An entry of one or
// two slots (most plans) holds them in the same allocation, right after
// its header: one cache line fewer to fetch per request.
func newPlanEntry(pk planKey, n int) *planEntry {
	switch n {
	case 1:
		pe := &struct {
			planEntry
			buf [1]planSlot
		}{planEntry: planEntry{key: pk}}
		pe.slots = pe.buf[:0]
		return &pe.planEntry
	case 2:
		pe := &struct {
			planEntry
			buf [2]planSlot
		}{planEntry: planEntry{key: pk}}
		pe.slots = pe.buf[:0]
		return &pe.planEntry
	}
	return &planEntry{key: pk, slots: make([]planSlot, 0, n)}
}

// add gives e a slot for plan's i-th limit. Slots of other plans' limits
// stay while they matter, so that a key moved back and forth between
// plans keeps them; the others go now.
func (e *planEntry) add(plan *store.Plan, i int, now int64) *planSlot {
	keep := e.slots[:0]
	for _, sl := range e.slots {
		if sl.over() > now || plan.Has(sl.name) {
			keep = append(keep, sl)
		}
	}
	e.slots = append(keep, planSlot{name: plan.Spec(i).Name})
	return &e.slots[len(e.slots)-1]
}

// evict removes one entry to make room, the least valuable of the first
// 16 that map iteration (which starts at random) yields: one that is
// over costs nothing; otherwise the one whose running quotas have counted
// least, then the one over soonest. A flood of fresh keys thus evicts its
// own kind before it evicts a customer's month of usage, which would hand
// the customer that usage again.
// With a state file, the victim's record is listed to go too.
func (sh *planShard) evict(now int64) {
	var victim uint64
	var best, bestExp int64
	found, seen := false, 0
	for k, e := range sh.entries {
		exp := e.over()
		if exp <= now {
			victim, found = k, true
			break
		}
		v := e.quotaUsed(now)
		if !found || v < best || v == best && exp < bestExp {
			victim, best, bestExp, found = k, v, exp, true
		}
		if seen++; seen == 16 {
			break
		}
	}
	if found {
		if sh.durable {
			sh.dirty = append(sh.dirty, planRef{h: victim, key: sh.entries[victim].key})
		}
		delete(sh.entries, victim)
	}
}

// quotaUsed is what e's quotas have counted in their running windows.
func (e *planEntry) quotaUsed(now int64) int64 {
	var n int64
	for i := range e.slots {
		if sl := &e.slots[i]; sl.quota != 0 && sl.b > now {
			n += sl.a
		}
	}
	return n
}

// sweep drops the entries that are over at now (µs), one shard at a time.
func (t *planTable) sweep(now int64) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for k, e := range sh.entries {
			if e.over() <= now {
				if sh.durable {
					sh.dirty = append(sh.dirty, planRef{h: k, key: e.key})
				}
				delete(sh.entries, k)
			}
		}
		sh.mu.Unlock()
	}
}

// usage reports the states held for pk (of hash h) that still matter at
// now.
func (t *planTable) usage(pk planKey, h uint64, now int64) []store.LimitUsage {
	sh := t.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entries[h]
	if e == nil || e.key != pk {
		return nil
	}
	var out []store.LimitUsage
	for _, sl := range e.slots {
		if sl.over() <= now {
			continue
		}
		u := store.LimitUsage{Name: sl.name, Period: sl.quota}
		if sl.quota != 0 {
			u.Window, u.Used, u.Reset = sl.quota.WindowName(sl.b), sl.a, micros(sl.b-now)
		} else {
			u.Reset = micros(sl.a - now)
			if sl.b > 0 {
				u.Reset += time.Microsecond
			}
		}
		out = append(out, u)
	}
	return out
}

// planUsage is Inspect's part for plans.
func (sp *memSpace) planUsage(k store.Key) []store.LimitUsage {
	var pk planKey
	var h uint64
	if k.Prefix.IsValid() {
		var mk addrKey
		mk, _, h = sp.addrKey(k.Prefix)
		pk = planKey{ns: sp.ns.id, hi: mk.hi, lo: mk.lo, bits: mk.meta&0xff + 1}
	} else {
		_, _, h = sp.nameKey(k.Name)
		pk = planKey{ns: sp.ns.id, name: k.Name}
	}
	return sp.s.plans.usage(pk, h, sp.s.micros(sp.s.now()))
}

// micros converts µs to a Duration, never negative.
func micros(us int64) time.Duration {
	if us <= 0 {
		return 0
	}
	return time.Duration(us) * time.Microsecond
}
