package main

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// How the Local API answers many bans: one listing of the store is
// shared by every request that asks while it is under way and kept as
// a snapshot, an ordered slice of small entries that answers and
// bouncers' histories share and never change; each answer is written
// from it a decision at a time into a buffer of its own, sent and
// reused every lapiChunk bytes. So an answer in flight holds its
// buffer and a reference, whatever the number of bans.

// lapiChunk is how much of an answer is encoded before it is written.
const lapiChunk = 32 << 10

// lapiReasons is how many distinct reasons a listing keeps one copy of.
const lapiReasons = 4096

// An entry is one decision of a snapshot: what its JSON is written from.
type entry struct {
	id       int64
	prefix   netip.Prefix
	until    int64 // Unix nanoseconds; a permanent ban's is lapiForever past the listing
	scenario string
}

func (e *entry) value() string {
	if e.prefix.IsSingleIP() {
		return e.prefix.Addr().String()
	}
	return e.prefix.String()
}

// cmpEntry orders entries by address, then prefix length, then id, so
// that an answer is the same for the same bans and two snapshots are
// compared in one walk.
func cmpEntry(a, b *entry) int {
	if c := a.prefix.Addr().Compare(b.prefix.Addr()); c != 0 {
		return c
	}
	if c := cmp.Compare(a.prefix.Bits(), b.prefix.Bits()); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// A snapshot is the decisions in force at one listing, in cmpEntry
// order. It is never changed once made.
type snapshot struct {
	ds []entry
	// epoch is the half lease of a block lists' snapshot (listSnapshot).
	epoch int64
}

// entryOf is ban b as a decision listed at now: a consumer ban has no
// address, and a record the store cannot read refuses nothing, so
// neither is a decision.
func entryOf(b protect.Ban, now time.Time) (entry, bool) {
	p := b.Key.Prefix
	if !p.IsValid() || b.Malformed != "" {
		return entry{}, false
	}
	until := b.Expires
	if b.Permanent() {
		until = now.Add(lapiForever)
	}
	return entry{id: decisionID(b), prefix: p, until: until.UnixNano(), scenario: b.Reason}, true
}

// A listing is one listing of the store under way, which every request
// arriving meanwhile waits for.
type listing struct {
	done chan struct{}
	snap *snapshot
	err  error
}

// snapshot lists the bans, or waits for the listing another request
// began. The listing runs without the first asker's cancellation, so
// that a bouncer going away fails no other.
func (l *lapi) snapshot(ctx context.Context) (*snapshot, error) {
	l.listMu.Lock()
	c := l.listing
	first := c == nil
	if first {
		c = &listing{done: make(chan struct{})}
		l.listing = c
	} else {
		l.joined.Add(1)
	}
	l.listMu.Unlock()
	if first {
		c.snap, c.err = l.list(context.WithoutCancel(ctx))
		l.listMu.Lock()
		l.listing = nil
		l.listMu.Unlock()
		close(c.done)
	}
	select {
	case <-c.done:
		return c.snap, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *lapi) list(ctx context.Context) (*snapshot, error) {
	bans, err := l.src.Bans(ctx, admin.Filter{})
	if err != nil {
		return nil, err
	}
	now := l.clock()
	ds := make([]entry, 0, len(bans))
	// A store that decodes each ban's reason gives each its own copy:
	// repeated reasons are kept once, up to a few thousand of them.
	reasons := map[string]string{}
	for _, b := range bans {
		e, ok := entryOf(b, now)
		if !ok {
			continue
		}
		if r, seen := reasons[e.scenario]; seen {
			e.scenario = r
		} else if len(reasons) < lapiReasons {
			reasons[e.scenario] = e.scenario
		}
		ds = append(ds, e)
	}
	slices.SortFunc(ds, func(a, b entry) int { return cmpEntry(&a, &b) })
	return &snapshot{ds: slices.Clip(ds)}, nil
}

// A lapiAnswer writes one response of the Local API: 200, its JSON
// encoded into buf and written whenever buf holds lapiChunk, each write
// under a deadline of stall (and the whole under answerMax), so that a
// bouncer that does not read is cut. An answer that fits in one chunk
// goes with its Content-Length.
type lapiAnswer struct {
	l       *lapi
	w       http.ResponseWriter
	rc      *http.ResponseController
	pool    *[]byte
	buf     []byte
	started bool
	stall   time.Duration
	end     time.Time
	n       int64 // bytes written
	err     error
}

func (l *lapi) newAnswer(w http.ResponseWriter) *lapiAnswer {
	l.writing.Add(1)
	p := l.bufs.Get().(*[]byte)
	return &lapiAnswer{l: l, w: w, rc: http.NewResponseController(w), pool: p, buf: (*p)[:0],
		stall: l.opt.stall, end: time.Now().Add(l.opt.answerMax)}
}

// release hands the buffer back for the next answer.
func (a *lapiAnswer) release() {
	*a.pool = a.buf[:0]
	a.l.bufs.Put(a.pool)
	a.l.writing.Add(-1)
}

func (a *lapiAnswer) raw(s string) {
	a.buf = append(a.buf, s...)
	a.maybeSend()
}

func (a *lapiAnswer) maybeSend() {
	if len(a.buf) >= lapiChunk {
		a.send()
	}
}

// send writes buf. The deadlines are real time, as the kernel's are.
func (a *lapiAnswer) send() {
	if a.err == nil {
		if !a.started {
			lapiHeaders(a.w)
			a.w.WriteHeader(http.StatusOK)
			a.started = true
		}
		d := time.Now().Add(a.stall)
		if d.After(a.end) {
			d = a.end
		}
		a.rc.SetWriteDeadline(d) // a recorder has none
		var n int
		n, a.err = a.w.Write(a.buf)
		a.n += int64(n)
	}
	a.buf = a.buf[:0]
}

// finish writes what is left and flushes it; an error says the answer
// did not leave whole.
func (a *lapiAnswer) finish() error {
	if !a.started {
		a.w.Header().Set("Content-Length", strconv.Itoa(len(a.buf)))
	}
	a.send()
	if a.err == nil {
		if err := a.rc.Flush(); err != nil && err != http.ErrNotSupported {
			a.err = err
		}
	}
	return a.err
}

// list writes the JSON array of the entries of s and of also (nil, or
// a snapshot of its own, merged in cmpEntry order) that keep selects,
// null when none does.
func (a *lapiAnswer) list(s, also *snapshot, keep func(*entry) bool, now int64) {
	var other []entry
	if also != nil {
		other = also.ds
	}
	first := true
	put := func(e *entry) {
		if !keep(e) || a.err != nil {
			return
		}
		if first {
			a.buf = append(a.buf, '[')
			first = false
		} else {
			a.buf = append(a.buf, ',')
		}
		a.buf = appendDecision(a.buf, e, now)
		a.maybeSend()
	}
	j := 0
	for i := range s.ds {
		for ; j < len(other) && cmpEntry(&other[j], &s.ds[i]) < 0; j++ {
			put(&other[j])
		}
		put(&s.ds[i])
	}
	for ; j < len(other); j++ {
		put(&other[j])
	}
	if first {
		a.raw("null")
	} else {
		a.raw("]")
	}
}

// entries writes the JSON array of es, null when empty.
func (a *lapiAnswer) entries(es []entry, now int64) {
	a.list(&snapshot{ds: es}, nil, func(*entry) bool { return true }, now)
}

// appendDecision appends e as CrowdSec's Local API writes a decision,
// its duration as left at now.
func appendDecision(b []byte, e *entry, now int64) []byte {
	b = append(b, `{"duration":"`...)
	b = append(b, time.Duration(e.until-now).Round(time.Millisecond).String()...)
	b = append(b, `","id":`...)
	b = strconv.AppendInt(b, e.id, 10)
	b = append(b, `,"origin":"`+lapiOrigin+`","scenario":`...)
	b = appendJSONString(b, e.scenario)
	if e.prefix.IsSingleIP() {
		b = append(b, `,"scope":"Ip","type":"ban","until":"`...)
	} else {
		b = append(b, `,"scope":"Range","type":"ban","until":"`...)
	}
	b = time.Unix(0, e.until).UTC().AppendFormat(b, time.RFC3339)
	b = append(b, `","value":"`...)
	if e.prefix.IsSingleIP() {
		b = e.prefix.Addr().AppendTo(b)
	} else {
		b = e.prefix.AppendTo(b)
	}
	return append(b, `"}`...)
}

// appendJSONString appends s as encoding/json writes it: as it is when
// nothing in it needs escaping, which is most reasons.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
