package memstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/httpprotect/protect/store"
)

// The memory store's journal (store.Journal): each ban namespace keeps
// the events of its bans in a ring, bounded by Options.JournalLength and
// Options.JournalAge. An event is appended under the lock that guards the
// change it records (a key's shard lock, the store's lock for a range
// ban), so that no reader sees the change without its event nor two
// changes of one key in another order than their events. A request that
// writes no ban does no journal work.
//
// An entry holds the heldBan the change was about: a heldBan is never
// changed once published, so the entry shares it with the table while the
// ban lives and keeps it alive after. An entry is journalEntryBytes; the
// ban it keeps, once lifted or over, about 200 bytes more plus its
// strings (TestJournalBytes measures both).
//
// A store with a state file writes each event there (durablejournal.go)
// and restores the journal at open: the events of the runs before, each
// run's numbered on from its own start, are the oldest of the ring, and
// this run numbers its events past them all.

// Journal defaults.
const (
	defaultJournalLength = 100_000
	defaultJournalAge    = 7 * 24 * time.Hour
)

// journalEntryBytes is the size of a ring entry: a pointer and two words.
const journalEntryBytes = 24

// eventLog is one ban namespace's journal.
type eventLog struct {
	mu   sync.Mutex
	ring []logEntry // circular once it holds max entries
	head int        // index of the oldest entry
	n    int        // entries held
	next uint64     // the sequence number of the next event (the first: journalStart)
	max  int        // entries kept at most
	age  int64      // ticks an entry is kept at most
	// old are the entries restored from a state file, the oldest of the
	// ring: a span of consecutive numbers for each run of the store that
	// wrote them, oldest first. nold is their count; the entries after
	// them are this run's, numbered up to next.
	old  []span
	nold int
	// start is the number of this run's first event; disk and high, the
	// lowest and highest numbers the state file held at open (0: none).
	start, disk, high uint64
}

// span is a run of consecutively numbered entries: n from first.
type span struct {
	first uint64
	n     int
}

// runGap is the least gap between the numbers of a restored journal and
// those of the run that restores it. A run numbers its events from its
// start in Unix nanoseconds, past every number of a run before; the gap
// keeps it so when the clock was stepped back between runs, so that a
// cursor naming an event the state file lost (a kill -9 before its
// write) is never taken for an event of this run.
const runGap = 1 << 32

// maxSeq bounds a restored event's number: a number past it is damage,
// and this run's numbers stay far from overflowing.
const maxSeq = 1 << 62

// logEntry is one event: what happened (kind) to which ban (b) at ticks t.
type logEntry struct {
	b    *heldBan
	t    int64
	kind store.EventKind
}

// newEventLog returns a journal whose first event is numbered first.
func newEventLog(length int, age time.Duration, first uint64) *eventLog {
	first = max(first, 1)
	return &eventLog{next: first, start: first, max: length, age: int64(age)}
}

// add appends an event at ticks t, trimming what is over by age or
// length. The caller holds the lock of the change it records.
func (l *eventLog) add(kind store.EventKind, b *heldBan, t int64) {
	l.mu.Lock()
	l.trim(t)
	l.push(logEntry{b: b, t: t, kind: kind})
	l.next++
	l.mu.Unlock()
}

// push appends e, dropping the oldest entry when the ring is full. l.mu
// is held, or the log is not shared yet.
func (l *eventLog) push(e logEntry) {
	if l.n == l.max {
		l.drop()
	}
	if l.n == len(l.ring) { // full below max: grow
		l.grow()
	}
	l.ring[(l.head+l.n)%len(l.ring)] = e
	l.n++
}

// restoreEntry appends e, numbered seq, read from a state file: the
// restore calls it in order of seq, before the log is shared, then
// resume. A seq that does not follow the last entry's starts a span.
func (l *eventLog) restoreEntry(seq uint64, e logEntry) {
	l.push(e)
	if k := len(l.old) - 1; k >= 0 && l.old[k].first+uint64(l.old[k].n) == seq {
		l.old[k].n++
	} else {
		l.old = append(l.old, span{first: seq, n: 1})
	}
	l.nold++
}

// forget drops every entry: the restore found one it could not read,
// and a reader placed before it must not read on past it.
func (l *eventLog) forget() {
	for l.n > 0 {
		l.drop()
	}
}

// resume numbers this run's events past every number the state file
// held (high), restored or not.
func (l *eventLog) resume() {
	if l.high != 0 && l.next < l.high+runGap {
		l.next = l.high + runGap
		l.start = l.next
	}
}

// grow makes the ring larger, up to max, its entries oldest first. l.mu
// is held.
func (l *eventLog) grow() {
	ring := make([]logEntry, min(max(2*len(l.ring), 64), l.max))
	for i := range l.n {
		ring[i] = l.ring[(l.head+i)%len(l.ring)]
	}
	l.ring, l.head = ring, 0
}

// trim drops the entries older than the age kept at ticks t. l.mu is
// held.
func (l *eventLog) trim(t int64) {
	for l.n > 0 && l.ring[l.head].t <= t-l.age {
		l.drop()
	}
}

// drop drops the oldest entry. l.mu is held.
func (l *eventLog) drop() {
	l.ring[l.head] = logEntry{} // let the ban go
	l.head = (l.head + 1) % len(l.ring)
	l.n--
	if len(l.old) > 0 {
		l.nold--
		l.old[0].first++
		if l.old[0].n--; l.old[0].n == 0 {
			l.old = l.old[1:]
		}
	}
	if l.n == 0 { // all over: give the ring back
		l.head, l.ring, l.old = 0, nil, nil
	}
}

// first is the sequence number of the oldest entry held (next when none
// is). l.mu is held.
func (l *eventLog) first() uint64 {
	if len(l.old) > 0 {
		return l.old[0].first
	}
	return l.runFirst()
}

// runFirst is the sequence number of this run's oldest entry held (next
// when none is). l.mu is held.
func (l *eventLog) runFirst() uint64 { return l.next - uint64(l.n-l.nold) }

// seen returns how many of the entries held a reader that has read the
// event numbered after has read: false when an event it has not read
// is no longer held (trimmed, or, between runs, lost from the state
// file). after is below next. l.mu is held.
func (l *eventLog) seen(after uint64) (int, bool) {
	// Past the first span held, the event before a span's first is none
	// this store numbered: the run before lost it, or it never was.
	k := 0
	for _, sp := range l.old {
		if after+1 < sp.first || k > 0 && after < sp.first {
			return 0, false
		}
		if after < sp.first+uint64(sp.n) {
			return k + int(after+1-sp.first), true
		}
		k += sp.n
	}
	first := l.runFirst() // a span too, after the restored ones
	if after+1 < first || k > 0 && after < first {
		return 0, false
	}
	return k + int(after+1-first), true
}

// each calls f for count entries from the k-th held, with their
// sequence numbers. l.mu is held.
func (l *eventLog) each(k, count int, f func(seq uint64, e *logEntry)) {
	i, in := 0, k // the span of entry k (len(l.old): this run's), and its place there
	for i < len(l.old) && in >= l.old[i].n {
		in -= l.old[i].n
		i++
	}
	for j := k; j < k+count; j++ {
		var seq uint64
		if i < len(l.old) {
			seq = l.old[i].first + uint64(in)
			if in++; in == l.old[i].n {
				i, in = i+1, 0
			}
		} else {
			seq = l.runFirst() + uint64(in)
			in++
		}
		f(seq, &l.ring[(l.head+j)%len(l.ring)])
	}
}

// read returns up to limit events after sequence number since (0: from
// the oldest kept) at ticks t, made by mk.
func (l *eventLog) read(since string, limit int, t int64, mk func(seq uint64, e *logEntry) store.Event) ([]store.Event, error) {
	var after uint64
	if since != "" {
		n, err := strconv.ParseUint(since, 10, 64)
		if err != nil || strconv.FormatUint(n, 10) != since {
			return nil, fmt.Errorf("%w: cursor %q: want a decimal sequence number", store.ErrBadCursor, since)
		}
		after = n
	}
	if limit <= 0 {
		return nil, fmt.Errorf("protect: journal: limit %d, want at least 1", limit)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trim(t)
	if after >= l.next {
		return nil, fmt.Errorf("%w: cursor %q is past the newest event (%d)", store.ErrBadCursor, since, l.next-1)
	}
	skip := 0
	if since != "" {
		k, ok := l.seen(after)
		if !ok {
			return nil, fmt.Errorf("%w: cursor %q, the oldest kept is %d", store.ErrCursorGone, since, l.first())
		}
		skip = k
	}
	count := min(l.n-skip, limit)
	if count == 0 {
		return nil, nil
	}
	out := make([]store.Event, 0, count)
	l.each(skip, count, func(seq uint64, e *logEntry) { out = append(out, mk(seq, e)) })
	return out, nil
}

// journalStart is the number of a new journal's first event: the store's
// epoch in Unix nanoseconds. A run numbers its events from the moment it
// started, so a cursor of an earlier run (whose events were fewer than
// its nanoseconds) is older than this run's first event: without a state
// file it reads as ErrCursorGone, never as a place in this run's journal;
// with one it names a restored event, or one the file lost, which reads
// as ErrCursorGone too (eventLog.seen).
func (s *Store) journalStart() uint64 { return uint64(max(s.epoch.UnixNano(), 1)) }

// Events implements store.Journal: the events of the space's ban
// namespace, which every Space bound to it shares. A cursor is the
// event's sequence number in the namespace, in decimal, counted from
// the store's start (journalStart).
func (sp *memSpace) Events(ctx context.Context, since string, limit int) ([]store.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := sp.s
	return sp.bns.events.read(since, limit, s.now(), func(seq uint64, e *logEntry) store.Event {
		return store.Event{Cursor: strconv.FormatUint(seq, 10), Kind: e.kind, Time: s.timeAt(e.t), Ban: e.b.ban}
	})
}
