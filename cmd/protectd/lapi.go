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
	// lapiHistoryMax is the most decisions a bouncer's history keeps:
	// past it, each pull is answered in full, as a first pull is.
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
	src   nftsink.Lister
	keys  [][sha256.Size]byte
	clock func() time.Time
	log   *slog.Logger
	opt   lapiOptions
	mux   *http.ServeMux

	conns   atomic.Uint64 // numbers the connections, from 1 (connContext)
	joined  atomic.Int64  // requests that shared a listing another had begun
	cut     atomic.Int64  // answers not written in full
	writing atomic.Int64  // answers under way
	bufs    sync.Pool     // *[]byte of lapiChunk, the answers' buffers
	listMu  sync.Mutex
	listing *listing // the listing under way, nil when none

	mu sync.Mutex
	// given holds, per key, where its bouncer stands: at most two
	// snapshots, shared with every other key and answer that holds them.
	given map[[sha256.Size]byte]*position
}

// A position is what a bouncer was given. sent is the last answer's
// snapshot, which the bouncer may not have read; acked the one before
// it. A pull on the connection that carried sent proves it read (an
// HTTP/1 client asks again on a connection only once it read the
// answer before), and is answered from sent; any other pull is answered
// from acked, so that one lost answer is sent again.
type position struct {
	acked, sent *snapshot
	sentConn    uint64
	full        bool // the list is past historyMax: every pull answers in full
}

func newLAPI(src nftsink.Lister, keys []string, clock func() time.Time, log *slog.Logger) *lapi {
	l := &lapi{src: src, clock: clock, log: log, given: map[[sha256.Size]byte]*position{},
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
// key never seen) every decision in force, else what changed since
// what that key's bouncer was given (see position): new decisions, and
// in deleted those lifted or over since. The filter selects from both,
// so that a bouncer changing its filter is told of no deletion that did
// not happen.
func (l *lapi) stream(w http.ResponseWriter, r *http.Request, key [sha256.Size]byte) {
	q := r.URL.Query()
	f, err := readFilter(q)
	if err != nil {
		lapiError(w, http.StatusBadRequest, err.Error())
		return
	}
	startup := q.Get("startup") == "true"
	snap, err := l.snapshot(r.Context())
	if err != nil {
		l.listFailed(w, err)
		return
	}
	conn := connOf(r)
	l.mu.Lock()
	pos := l.given[key]
	var base *snapshot
	if pos != nil && !startup {
		base = pos.acked
		if conn != 0 && conn == pos.sentConn {
			base = pos.sent
		}
	}
	var sentBefore *snapshot
	if pos != nil {
		sentBefore = pos.sent
	}
	l.mu.Unlock()

	a := l.newAnswer(w)
	defer a.release()
	now := l.clock().UnixNano()
	a.raw(`{"deleted":`)
	a.diff(base, snap, f, now)
	a.raw(`,"new":`)
	a.diff(snap, base, f, now)
	a.raw(`}`)
	if !l.finish(a) {
		return // not given: the next pull is answered as if this one never was
	}

	next := &position{sent: snap, sentConn: conn, acked: sentBefore}
	if startup {
		// A bouncer that loses its startup answer asks for it again.
		next.acked = snap
	}
	if len(snap.ds) > l.opt.historyMax {
		next = &position{full: true}
		if pos == nil || !pos.full {
			l.log.Warn("crowdsec local api: too many decisions to keep a bouncer's history; its pulls are answered in full",
				"decisions", len(snap.ds), "max", l.opt.historyMax)
		}
	}
	l.mu.Lock()
	l.given[key] = next
	l.mu.Unlock()
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
	a := l.newAnswer(w)
	defer a.release()
	now := l.clock().UnixNano()
	a.list(snap, func(e *entry) bool { return f.match(e) && sel.match(e) }, now)
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
