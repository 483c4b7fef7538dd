package memstore

import (
	"bytes"
	"cmp"
	"fmt"
)

// A store with a state file keeps its journals and their bookmarks there
// too, so that a reader's place from before a restart reads on after it:
// the events after it are there, in order, numbered as they were.
//
// The writer takes them as it takes the bans: at each flush it reads,
// under each journal's lock, the events appended since the flush before
// and writes them in the same transaction as the changes they record
// (whose notes woke it). A bookmark set is noted as a ban is; the flush
// reads the bookmarks before the journals, so that a bookmark written
// names an event written by the same transaction or one before. An
// event trimmed from the ring (Options.JournalLength, JournalAge) is
// deleted from the file by the next flush: the file holds what the ring
// holds.
//
// A restore puts the events back as the oldest of the ring, each run's
// numbered as that run numbered them, and numbers this run's events
// past them (runGap). A bookmark comes back with its expiry; one over
// is deleted. A record that does not decode is skipped; a journal
// record of a namespace known (its key decodes), or a gap in the numbers
// of one run (each record names its run's first number), also drops the
// events of that namespace older than it, so that a reader placed
// before the lost event is told its events are gone
// (store.ErrCursorGone) and starts again, rather than read on past an
// event it never saw.

// markRef names a bookmark of a ban namespace.
type markRef struct {
	ns   uint64
	name string
}

// logMark is how far the writer wrote a namespace's journal: every
// event numbered below wrote is written, none below diskFirst is on
// disk.
type logMark struct {
	wrote, diskFirst uint64
}

// noteMark notes a change of bookmark name of namespace ns.
func (j *journal) noteMark(ns uint64, name string) {
	if j != nil {
		j.marks.add(markRef{ns: ns, name: name})
	}
}

// markOps appends the ops that write each bookmark noted as it is at
// ticks now, or delete it.
func (j *journal) markOps(ops []diskOp, now, base int64) []diskOp {
	refs := j.marks.take(j.spareM)
	for i, r := range refs {
		j.s.mu.Lock()
		ns := j.s.byID[r.ns-1]
		j.s.mu.Unlock()
		b := &ns.marks
		b.mu.Lock()
		m, ok := b.m[r.name]
		b.mu.Unlock()
		op := diskOp{bucket: bucketMarks, key: appendMarkKey(nil, ns.name, r.name)}
		if ok && m.expires > now {
			op.val = appendMarkValue(nil, m.text, unixNano(m.expires, base))
		}
		ops = append(ops, op)
		refs[i] = markRef{}
	}
	j.spareM = refs
	return ops
}

// eventOps appends the ops that write the events appended to each
// journal since the last flush, and delete those trimmed, at ticks now.
func (j *journal) eventOps(ops []diskOp, now, base int64) []diskOp {
	s := j.s
	s.mu.Lock()
	spaces := append(j.spaces[:0], s.byID...)
	s.mu.Unlock()
	for _, ns := range spaces {
		l := ns.events
		l.mu.Lock()
		w, ok := j.logs[ns.id]
		if !ok { // first met: what the file held at open is written
			w = logMark{diskFirst: cmp.Or(l.disk, l.start)}
		}
		l.trim(now)
		first, runFirst, start := l.first(), l.runFirst(), l.start
		from := max(w.wrote, runFirst)
		k := l.nold + int(from-runFirst)
		entries := j.entries[:0]
		l.each(k, l.n-k, func(_ uint64, e *logEntry) { entries = append(entries, *e) })
		w.wrote = l.next
		l.mu.Unlock()
		for i := range entries {
			e := &entries[i]
			ops = append(ops, diskOp{bucket: bucketJournal, key: appendJournalKey(nil, ns.name, from+uint64(i)),
				val: appendEventValue(nil, e.kind, unixNano(e.t, base), start, &e.b.ban, endNano(e.b.end, base))})
			*e = logEntry{} // let the ban go
		}
		j.entries = entries
		if first > w.diskFirst {
			ops = append(ops, diskOp{bucket: bucketJournal, key: appendJournalKey(nil, ns.name, w.diskFirst),
				upto: appendJournalKey(nil, ns.name, first)})
			w.diskFirst = first
		}
		j.logs[ns.id] = w
	}
	clear(spaces)
	j.spaces = spaces[:0]
	return ops
}

// apply writes op in st's transaction.
func (st *stateTx) apply(op diskOp) error {
	if op.upto == nil {
		return st.put(op.bucket, op.key, op.val)
	}
	// Collected first, for a cursor must not see its bucket change; each
	// key found is there, so it is deleted without looking it up again.
	b := st.tx.Bucket(op.bucket)
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(op.key); k != nil && bytes.Compare(k, op.upto) < 0; k, _ = c.Next() {
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	n := st.rec.count(op.bucket)
	*n -= min(*n, uint64(len(keys)))
	return nil
}

// restoredRun is the last event a restore read of a namespace.
type restoredRun struct {
	run, seq uint64
}

// event restores a journal record.
func (r *restorer) event(k, v []byte) error {
	name, seq, err := decodeJournalKey(k, r.in)
	if err != nil {
		r.skip("journal", k, err)
		return nil
	}
	ns := r.namespace(name)
	if ns.events.disk == 0 {
		ns.events.disk = seq
	}
	ns.events.high = seq // records come in order
	d, err := decodeEventValue(v, r.in)
	last, seen := r.runs[ns]
	if err == nil && seen && d.run == last.run && seq != last.seq+1 {
		err = fmt.Errorf("%w: event %d follows %d of its run: those between are lost", errRecord, seq, last.seq)
	}
	if err != nil {
		r.skip("journal", k, err)
		ns.events.forget()
		delete(r.runs, ns)
		return nil
	}
	r.runs[ns] = restoredRun{run: d.run, seq: seq}
	held := r.heldOf(d.key, d.rng, &d.ban)
	ns.events.restoreEntry(seq, logEntry{b: held, t: r.tick(d.t), kind: d.kind})
	return nil
}

// resumeLogs trims the journals restored as a read would, and numbers
// this run's events past them.
func (r *restorer) resumeLogs() {
	for _, ns := range r.s.byID {
		ns.events.trim(r.now)
		ns.events.resume()
		r.st.events += ns.events.n
	}
}

// mark restores a bookmark record.
func (r *restorer) mark(k, v []byte) error {
	name, mark, err := decodeMarkKey(k, r.in)
	if err != nil {
		r.skip("bookmarks", k, err)
		return nil
	}
	text, exp, err := decodeMarkValue(v)
	if err != nil {
		r.skip("bookmarks", k, err)
		return nil
	}
	if exp <= r.base+r.now { // a time before now, in Unix ns: no overflow
		r.expire(bucketMarks, k)
		return nil
	}
	exp = r.tick(exp)
	b := &r.namespace(name).marks
	if b.m == nil {
		b.m = map[string]bookmark{}
	}
	if len(b.m) >= maxBookmarks {
		r.skip("bookmarks", k, fmt.Errorf("%w: past %d bookmarks of namespace %q", errRecord, maxBookmarks, name))
		return nil
	}
	b.m[mark] = bookmark{text: text, expires: exp}
	r.st.marks++
	return nil
}
