package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/nftsink"
	"github.com/httpprotect/protect/store"
)

// The bouncer side of CrowdSec's Local API: every CrowdSec bouncer
// (nginx, Traefik, Caddy, HAProxy, the firewall's) that is pointed at
// protectd enforces protect's bans, as if they were CrowdSec's decisions.
// Every ban counts, whoever wrote it: automatic, manual, and the range
// bans of escalation.

const (
	lapiOrigin = "protect"
	// lapiForever stands for a permanent ban, which CrowdSec's decisions
	// cannot express: ten years, which a bouncer turns into a timeout
	// the kernel accepts.
	lapiForever = 10 * 365 * 24 * time.Hour
	// lapiStall is how long one write of an answer may wait for the
	// bouncer to read: a bouncer that stops reading is cut, and what
	// its answer holds is freed.
	lapiStall = 10 * time.Second
	// lapiAnswerMax bounds a whole answer, so that a bouncer reading a
	// byte now and then cannot hold a listing for ever.
	lapiAnswerMax = 5 * time.Minute
	// lapiHistoryMax is the most keys a pull reads changes of: past
	// it, the pull is answered in full, as a first pull is.
	lapiHistoryMax = 1 << 20
)

// lapiOptions tune the Local API: newLAPI sets the defaults above, and
// tests shorten them.
type lapiOptions struct {
	stall, answerMax time.Duration
	historyMax       int
}

// lapi serves the Local API for p's bans to bouncers holding one of its
// keys.
type lapi struct {
	src     nftsink.Lister
	journal store.Bookmarks      // the feed's journal and places (lapifeed.go); nil: every pull in full
	lists   func() []protect.Ban // the block lists' entries handed on; nil: none
	self    string               // instanceID
	keys    [][sha256.Size]byte
	clock   func() time.Time
	log     *slog.Logger
	opt     lapiOptions
	mux     *http.ServeMux

	conns   atomic.Uint64 // numbers the connections, from 1 (connContext)
	joined  atomic.Int64  // requests that shared a listing another had begun
	cut     atomic.Int64  // answers not written in full
	writing atomic.Int64  // answers under way
	bufs    sync.Pool     // *[]byte of lapiChunk, the answers' buffers
	listMu  sync.Mutex
	listing *listing // the listing under way, nil when none

	listSnaps map[uint64]*snapshot // by hash, guarded by listMu (lapifeed.go)
	lost      atomic.Int64         // pulls answered in full for a place the journal lost

	headMu     sync.Mutex
	headCursor string // the newest event's cursor last found (head)
}

// newLAPI serves src's bans to bouncers holding one of keys, each
// bouncer's place kept in j; lists, when not nil, gives the block lists'
// entries to hand on beside.
func newLAPI(src nftsink.Lister, j store.Bookmarks, lists func() []protect.Ban, keys []string, clock func() time.Time, log *slog.Logger) *lapi {
	l := &lapi{src: src, journal: j, lists: lists, self: instanceID(), listSnaps: map[uint64]*snapshot{}, clock: clock, log: log,
		opt: lapiOptions{stall: lapiStall, answerMax: lapiAnswerMax, historyMax: lapiHistoryMax}}
	l.bufs.New = func() any { b := make([]byte, 0, lapiChunk+lapiChunk/4); return &b }
	for _, k := range keys {
		l.keys = append(l.keys, sha256.Sum256([]byte(k)))
	}
	l.mux = http.NewServeMux()
	l.mux.HandleFunc("GET /v1/decisions/stream", l.auth(l.stream))
	l.mux.HandleFunc("GET /v1/decisions", l.auth(l.decisions))
	l.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		lapiError(w, http.StatusNotFound, "page not found")
	})
	return l
}

// ServeHTTP answers r under a fresh write deadline of stall: the
// answer before on the connection may have left one behind.
func (l *lapi) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(l.opt.stall)) // a recorder has none
	l.mux.ServeHTTP(w, r)
}

// lapiConnKey holds a connection's number in its requests' contexts.
type lapiConnKey struct{}

// connContext is the Local API server's ConnContext: it numbers each
// connection, so that a pull knows whether it came on the connection
// that carried its bouncer's last answer.
func (l *lapi) connContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, lapiConnKey{}, l.conns.Add(1))
}

// connOf is the number of r's connection; 0 when unknown, which no
// connection has.
func connOf(r *http.Request) uint64 {
	if r.ProtoMajor != 1 {
		return 0 // HTTP/2 multiplexes: a second request proves nothing of the first
	}
	n, _ := r.Context().Value(lapiConnKey{}).(uint64)
	return n
}

// auth admits a request whose X-Api-Key is one of l's keys. The keys are
// compared as hashes in constant time, every one of them, so that
// neither the time of an answer nor which key it stopped at tells a
// guesser anything.
func (l *lapi) auth(next func(http.ResponseWriter, *http.Request, [sha256.Size]byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(r.Header.Get("X-Api-Key")))
		ok := 0
		for _, k := range l.keys {
			ok |= subtle.ConstantTimeCompare(got[:], k[:])
		}
		if ok != 1 || r.Header.Get("X-Api-Key") == "" {
			lapiError(w, http.StatusForbidden, "access forbidden")
			return
		}
		next(w, r, got)
	}
}

func lapiError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(struct {
		Message string `json:"message"`
	}{msg})
	lapiHeaders(w)
	w.WriteHeader(status)
	w.Write(b)
}

func lapiHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
}

// The names CrowdSec's filters know. A name outside them is refused: a
// misspelled filter would otherwise select nothing, and the bouncer
// would enforce nothing without a word.
var (
	lapiScopes  = []string{"ip", "range", "country", "as"}
	lapiOrigins = []string{"cscli", "crowdsec", "console", "cscli-import", "lists", "capi", "remediation_sync", lapiOrigin}
	lapiTypes   = []string{"ban", "captcha", "throttle"}
)

// filter is what a bouncer asks for: CrowdSec's scopes, origins, type
// and scenario filters, in lower case; the zero filter selects
// everything.
type filter struct {
	scopes, origins, types  []string
	scenarioIn, scenarioOut []string
}

func lowerList(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.ToLower(strings.TrimSpace(s)); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// knownList reads the comma list of parameter name, each item one of
// known, case aside.
func knownList(q url.Values, name string, known []string) ([]string, error) {
	out := lowerList(q.Get(name))
	for _, s := range out {
		if !slices.Contains(known, s) {
			return nil, fmt.Errorf("%s: unknown %s (want %s)", name, strconv.Quote(s), strings.Join(known, ", "))
		}
	}
	return out, nil
}

// readFilter reads the filter of q. scope= is CrowdSec's other name
// for scopes=, and both are read.
func readFilter(q url.Values) (filter, error) {
	var f filter
	var err error
	if f.scopes, err = knownList(q, "scopes", lapiScopes); err != nil {
		return f, err
	}
	one, err := knownList(q, "scope", lapiScopes)
	if err != nil {
		return f, err
	}
	f.scopes = append(f.scopes, one...)
	if f.origins, err = knownList(q, "origins", lapiOrigins); err != nil {
		return f, err
	}
	if f.types, err = knownList(q, "type", lapiTypes); err != nil {
		return f, err
	}
	f.scenarioIn = lowerList(q.Get("scenarios_containing"))
	f.scenarioOut = lowerList(q.Get("scenarios_not_containing"))
	return f, nil
}

func (f filter) match(e *entry) bool {
	scope := "range"
	if e.prefix.IsSingleIP() {
		scope = "ip"
	}
	switch {
	case len(f.scopes) > 0 && !slices.Contains(f.scopes, scope),
		len(f.origins) > 0 && !slices.Contains(f.origins, lapiOrigin),
		len(f.types) > 0 && !slices.Contains(f.types, "ban"):
		return false
	}
	if len(f.scenarioIn) == 0 && len(f.scenarioOut) == 0 {
		return true
	}
	sc := strings.ToLower(e.scenario)
	for _, s := range f.scenarioOut {
		if strings.Contains(sc, s) {
			return false
		}
	}
	if len(f.scenarioIn) == 0 {
		return true
	}
	for _, s := range f.scenarioIn {
		if strings.Contains(sc, s) {
			return true
		}
	}
	return false
}

// decisionID names one ban: its key and when it was written, so that a
// ban written again (escalated, or renewed by an operator) is a new
// decision and the old one is deleted. It stays below 2^53, which every
// JSON reader holds exactly.
func decisionID(b protect.Ban) int64 {
	h := fnv.New64a()
	h.Write([]byte(b.Key.String()))
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(b.Created.UnixNano()))
	h.Write(t[:])
	return int64(h.Sum64()&(1<<53-1)) | 1
}

// stream answers GET /v1/decisions/stream: with startup=true (or to a
// key with no place in the store) every decision in force, else what
// changed since the key's place (lapifeed.go): new decisions, and in
// deleted those lifted, over or written again since. The filter selects
// from both, so that a bouncer changing its filter is told of no
// deletion that did not happen.
func (l *lapi) stream(w http.ResponseWriter, r *http.Request, key [sha256.Size]byte) {
	q := r.URL.Query()
	f, err := readFilter(q)
	if err != nil {
		lapiError(w, http.StatusBadRequest, err.Error())
		return
	}
	if l.journal == nil {
		l.full(w, r, f, nil, nil)
		return
	}
	conn := l.self + ":" + strconv.FormatUint(connOf(r), 10)
	if connOf(r) == 0 {
		conn = "" // no proof of reading: never matched
	}
	pos, known, before, err := l.position(r.Context(), key)
	if err != nil {
		l.listFailed(w, err)
		return
	}
	// A place is saved before the answer's end leaves, so that a pull
	// sent the moment the bouncer has it finds it, and put back when the
	// answer did not leave whole (unless another pull saved one since):
	// the next pull is then answered as if this one never was.
	var saved string
	undo := func() { l.restorePosition(r.Context(), key, saved, before) }
	fullGiven := func(m lapiMark) {
		// A bouncer that loses its startup answer asks for it again.
		saved = l.savePosition(r.Context(), key, lapiPosition{Acked: m, Sent: m, Conn: conn})
	}
	if q.Get("startup") == "true" || !known {
		l.full(w, r, f, fullGiven, undo)
		return
	}
	base := pos.Acked
	if conn != "" && conn == pos.Conn {
		base = pos.Sent
	}
	m, cursor, err := l.changes(r.Context(), base.Cursor)
	if errors.Is(err, errFeedLost) {
		l.lost.Add(1)
		l.log.Warn("crowdsec local api: "+err.Error()+"; every decision in force is sent, as to a first pull",
			"bookmark", bookmarkName(key))
		l.full(w, r, f, fullGiven, undo)
		return
	}
	if err != nil {
		l.listFailed(w, err)
		return
	}
	now := l.clock()
	deleted, added := feedEntries(m, f, now)
	lists, hash := l.listSnapshot(now)
	ld, la := l.listChanges(base.Lists, lists, f)
	deleted, added = append(deleted, ld...), append(added, la...)
	sortEntries(deleted)
	sortEntries(added)

	a := l.newAnswer(w)
	defer a.release()
	a.raw(`{"deleted":`)
	a.entries(deleted, now.UnixNano())
	a.raw(`,"new":`)
	a.entries(added, now.UnixNano())
	a.raw(`}`)
	saved = l.savePosition(r.Context(), key, lapiPosition{Acked: pos.Sent, Sent: lapiMark{Cursor: cursor, Lists: hash}, Conn: conn})
	if !l.finish(a) {
		undo()
	}
}

// full answers every decision in force that f selects as new. It
// reports what it covered to given before the answer's end leaves (the
// journal to its head before the listing, so that what changes while it
// lists is in the events after, and the block lists' snapshot), and
// calls undo when the answer did not leave whole.
func (l *lapi) full(w http.ResponseWriter, r *http.Request, f filter, given func(lapiMark), undo func()) {
	var mark lapiMark
	if l.journal != nil {
		head, err := l.head(r.Context())
		if err != nil {
			l.listFailed(w, err)
			return
		}
		mark.Cursor = head
	}
	snap, err := l.snapshot(r.Context())
	if err != nil {
		l.listFailed(w, err)
		return
	}
	now := l.clock()
	lists, hash := l.listSnapshot(now)
	mark.Lists = hash
	a := l.newAnswer(w)
	defer a.release()
	a.raw(`{"deleted":null,"new":`)
	a.list(snap, lists, f.match, now.UnixNano())
	a.raw(`}`)
	if given != nil {
		given(mark)
	}
	if !l.finish(a) && undo != nil {
		undo()
	}
}

// listFailed answers a listing that failed with a 500 that says no
// more than that: the store's words stay in the log.
func (l *lapi) listFailed(w http.ResponseWriter, err error) {
	if errors.Is(err, context.Canceled) {
		return // the bouncer is gone
	}
	l.log.Error("crowdsec local api: list bans", "err", err.Error())
	lapiError(w, http.StatusInternalServerError, "bans unavailable")
}

// decisions answers GET /v1/decisions: the decisions in force that its
// query selects, as CrowdSec reads it: ip= those that apply to the
// address (its own, and the ranges that hold it); range= those whose
// range holds the one given, or with contains=false those inside it;
// scope= and value= those of that scope (case aside) and value; type=
// those of that type, which is ban for every decision here. Null when
// none. A filter that does not parse is a 400, never an answer without
// it: a bouncer in live mode that asks of one address and reads every
// decision back would refuse every client.
func (l *lapi) decisions(w http.ResponseWriter, r *http.Request, _ [sha256.Size]byte) {
	q := r.URL.Query()
	f, err := readFilter(q)
	if err != nil {
		lapiError(w, http.StatusBadRequest, err.Error())
		return
	}
	sel, err := readSelection(q)
	if err != nil {
		lapiError(w, http.StatusBadRequest, err.Error())
		return
	}
	snap, err := l.snapshot(r.Context())
	if err != nil {
		l.listFailed(w, err)
		return
	}
	now := l.clock()
	lists, _ := l.listSnapshot(now)
	a := l.newAnswer(w)
	defer a.release()
	a.list(snap, lists, func(e *entry) bool { return f.match(e) && sel.match(e) }, now.UnixNano())
	l.finish(a)
}

// finish ends answer a, and reports whether it left whole.
func (l *lapi) finish(a *lapiAnswer) bool {
	if err := a.finish(); err != nil {
		l.cut.Add(1)
		l.log.Warn("crowdsec local api: answer cut", "bytes", a.n, "err", err.Error())
		return false
	}
	return true
}

// selection is what the query of GET /v1/decisions asks for, besides
// the filter the stream shares.
type selection struct {
	ip       netip.Addr   // ip=; invalid when absent
	rng      netip.Prefix // range=; invalid when absent
	contains bool         // contains=: range= selects the ranges that hold it (true, the default) or those inside it
	value    string       // value=
}

func readSelection(q url.Values) (selection, error) {
	sel := selection{contains: true, value: q.Get("value")}
	if v := q.Get("ip"); v != "" {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return sel, errors.New("ip: not an address")
		}
		sel.ip = a.Unmap().WithZone("")
	}
	if v := q.Get("range"); v != "" {
		k, err := protect.ParseKey(v) // unmapped, as ban keys are
		if err != nil || !k.Prefix.IsValid() {
			return sel, errors.New("range: not a CIDR")
		}
		sel.rng = k.Prefix
	}
	if v := q.Get("contains"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return sel, errors.New("contains: want true or false")
		}
		sel.contains = b
	}
	return sel, nil
}

func (sel selection) match(e *entry) bool {
	p := e.prefix
	switch {
	case sel.value != "" && sel.value != e.value(),
		sel.ip.IsValid() && !p.Contains(sel.ip):
		return false
	case sel.rng.IsValid():
		if p.Addr().Is4() != sel.rng.Addr().Is4() {
			return false
		}
		if sel.contains {
			return p.Bits() <= sel.rng.Bits() && p.Contains(sel.rng.Addr())
		}
		return sel.rng.Bits() <= p.Bits() && sel.rng.Contains(p.Addr())
	}
	return true
}
