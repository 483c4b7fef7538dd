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
}

// logEntry is one event: what happened (kind) to which ban (b) at ticks t.
type logEntry struct {
	b    *heldBan
	t    int64
	kind store.EventKind
}

// newEventLog returns a journal whose first event is numbered first.
func newEventLog(length int, age time.Duration, first uint64) *eventLog {
	return &eventLog{next: max(first, 1), max: length, age: int64(age)}
}

// add appends an event at ticks t, trimming what is over by age or
// length. The caller holds the lock of the change it records.
func (l *eventLog) add(kind store.EventKind, b *heldBan, t int64) {
	l.mu.Lock()
	l.trim(t)
	if l.n == l.max {
		l.drop()
	}
	if l.n == len(l.ring) { // full below max: grow
		l.grow()
	}
	l.ring[(l.head+l.n)%len(l.ring)] = logEntry{b: b, t: t, kind: kind}
	l.n++
	l.next++
	l.mu.Unlock()
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
	if l.n == 0 { // all over: give the ring back
		l.head, l.ring = 0, nil
	}
}

// first is the sequence number of the oldest entry held (next when none
// is). l.mu is held.
func (l *eventLog) first() uint64 { return l.next - uint64(l.n) }

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
	first := l.first()
	switch {
	case after >= l.next:
		return nil, fmt.Errorf("%w: cursor %q is past the newest event (%d)", store.ErrBadCursor, since, l.next-1)
	case since != "" && after+1 < first:
		return nil, fmt.Errorf("%w: cursor %q, the oldest kept is %d", store.ErrCursorGone, since, first)
	}
	skip := uint64(0)
	if after >= first {
		skip = after + 1 - first
	}
	count := min(uint64(l.n)-skip, uint64(limit))
	if count == 0 {
		return nil, nil
	}
	out := make([]store.Event, count)
	for i := range out {
		k := int(skip) + i
		out[i] = mk(first+uint64(k), &l.ring[(l.head+k)%len(l.ring)])
	}
	return out, nil
}

// journalStart is the number of a new journal's first event: the store's
// epoch in Unix nanoseconds. A run numbers its events from the moment it
// started, so a cursor of an earlier run (whose events were fewer than
// its nanoseconds) is older than this run's first event, and reads as
// ErrCursorGone, never as a place in this run's journal.
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
