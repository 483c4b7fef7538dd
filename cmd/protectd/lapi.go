package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/nftsink"
)

// The bouncer side of CrowdSec's Local API: every CrowdSec bouncer
// (nginx, Traefik, Caddy, HAProxy, the firewall's) that is pointed at
// protectd enforces protect's bans, as if they were CrowdSec's decisions.
// Every ban counts, whoever wrote it: automatic, manual, and the range
// bans of escalation.

// lapiDecision is a decision as CrowdSec's Local API writes one.
type lapiDecision struct {
	Duration string `json:"duration"`
	ID       int64  `json:"id"`
	Origin   string `json:"origin"`
	Scenario string `json:"scenario"`
	Scope    string `json:"scope"`
	Type     string `json:"type"`
	Until    string `json:"until"`
	Value    string `json:"value"`

	prefix netip.Prefix // the ban's key, which Value writes: what GET /v1/decisions filters by
}

// lapiStream is the answer of /v1/decisions/stream. An empty list is
// null, as CrowdSec writes it.
type lapiStream struct {
	Deleted []lapiDecision `json:"deleted"`
	New     []lapiDecision `json:"new"`
}

const (
	lapiOrigin = "protect"
	// lapiForever stands for a permanent ban, which CrowdSec's decisions
	// cannot express: ten years, which a bouncer turns into a timeout
	// the kernel accepts.
	lapiForever = 10 * 365 * 24 * time.Hour
)

// lapi serves the Local API for p's bans to bouncers holding one of its
// keys.
type lapi struct {
	src   nftsink.Lister
	keys  [][sha256.Size]byte
	clock func() time.Time
	log   *slog.Logger

	mu sync.Mutex
	// given holds, per key, the decisions last given to its bouncer:
	// the next pull answers with what changed since.
	given map[[sha256.Size]byte]map[int64]lapiDecision
}

func newLAPI(src nftsink.Lister, keys []string, clock func() time.Time, log *slog.Logger) http.Handler {
	l := &lapi{src: src, clock: clock, log: log, given: map[[sha256.Size]byte]map[int64]lapiDecision{}}
	for _, k := range keys {
		l.keys = append(l.keys, sha256.Sum256([]byte(k)))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/decisions/stream", l.auth(l.stream))
	mux.HandleFunc("GET /v1/decisions", l.auth(l.decisions))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		lapiError(w, http.StatusNotFound, "page not found")
	})
	return mux
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
	writeLAPI(w, status, struct {
		Message string `json:"message"`
	}{msg})
}

func writeLAPI(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}

// filter is what a bouncer asks for: CrowdSec's scopes, origins and
// scenario filters; the zero filter selects everything.
type filter struct {
	scopes, origins         []string
	scenarioIn, scenarioOut []string
}

func lowerList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.ToLower(strings.TrimSpace(s)); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func readFilter(r *http.Request) filter {
	q := r.URL.Query()
	return filter{
		scopes:      lowerList(q.Get("scopes")),
		origins:     lowerList(q.Get("origins")),
		scenarioIn:  lowerList(q.Get("scenarios_containing")),
		scenarioOut: lowerList(q.Get("scenarios_not_containing")),
	}
}

func (f filter) match(d lapiDecision) bool {
	if len(f.scopes) > 0 && !slices.Contains(f.scopes, strings.ToLower(d.Scope)) {
		return false
	}
	if len(f.origins) > 0 && !slices.Contains(f.origins, d.Origin) {
		return false
	}
	sc := strings.ToLower(d.Scenario)
	if len(f.scenarioIn) > 0 && !slices.ContainsFunc(f.scenarioIn, func(s string) bool { return strings.Contains(sc, s) }) {
		return false
	}
	return !slices.ContainsFunc(f.scenarioOut, func(s string) bool { return strings.Contains(sc, s) })
}

// current lists the decisions in force that f selects, by id.
func (l *lapi) current(ctx context.Context, f filter, now time.Time) (map[int64]lapiDecision, error) {
	bans, err := l.src.Bans(ctx, protect.BanFilter{})
	if err != nil {
		return nil, err
	}
	out := make(map[int64]lapiDecision, len(bans))
	for _, b := range bans {
		d, ok := decisionOf(b, now)
		if ok && f.match(d) {
			out[d.ID] = d
		}
	}
	return out, nil
}

// decisionOf is ban b as a CrowdSec decision at now: scope Ip for one
// address, Range for a wider prefix (an IPv6 client's counting prefix
// too); a consumer ban has no address and is no decision.
func decisionOf(b protect.Ban, now time.Time) (lapiDecision, bool) {
	p := b.Key.Prefix
	if !p.IsValid() {
		return lapiDecision{}, false
	}
	d := lapiDecision{
		ID:       decisionID(b),
		Origin:   lapiOrigin,
		Scenario: b.Reason,
		Scope:    "Range",
		Type:     "ban",
		Value:    p.String(),
		prefix:   p,
	}
	if p.IsSingleIP() {
		d.Scope, d.Value = "Ip", p.Addr().String()
	}
	until := b.Expires
	if b.Permanent() {
		until = now.Add(lapiForever)
	}
	d.Duration = until.Sub(now).Round(time.Millisecond).String()
	d.Until = until.UTC().Format(time.RFC3339)
	return d, true
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
// key never seen) every decision in force, else what changed since that
// key's last pull: new decisions, and in deleted those lifted or over
// since.
func (l *lapi) stream(w http.ResponseWriter, r *http.Request, key [sha256.Size]byte) {
	now := l.clock()
	cur, err := l.current(r.Context(), readFilter(r), now)
	if err != nil {
		l.log.Error("crowdsec local api: list bans", "err", err.Error())
		lapiError(w, http.StatusInternalServerError, "bans unavailable")
		return
	}
	startup := r.URL.Query().Get("startup") == "true"
	l.mu.Lock()
	prev, seen := l.given[key]
	l.given[key] = cur
	l.mu.Unlock()
	var out lapiStream
	for id, d := range cur {
		if _, had := prev[id]; startup || !seen || !had {
			out.New = append(out.New, d)
		}
	}
	if !startup {
		for id, d := range prev {
			if _, still := cur[id]; !still {
				until, err := time.Parse(time.RFC3339, d.Until)
				if err == nil {
					d.Duration = until.Sub(now).Round(time.Millisecond).String()
				}
				out.Deleted = append(out.Deleted, d)
			}
		}
	}
	sortDecisions(out.New)
	sortDecisions(out.Deleted)
	writeLAPI(w, http.StatusOK, out)
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
	sel, err := readSelection(r.URL.Query())
	if err != nil {
		lapiError(w, http.StatusBadRequest, err.Error())
		return
	}
	cur, err := l.current(r.Context(), readFilter(r), l.clock())
	if err != nil {
		l.log.Error("crowdsec local api: list bans", "err", err.Error())
		lapiError(w, http.StatusInternalServerError, "bans unavailable")
		return
	}
	var out []lapiDecision
	for _, d := range cur {
		if sel.match(d) {
			out = append(out, d)
		}
	}
	sortDecisions(out)
	writeLAPI(w, http.StatusOK, out)
}

// selection is what the query of GET /v1/decisions asks for, besides
// the filter the stream shares.
type selection struct {
	ip           netip.Addr   // ip=; invalid when absent
	rng          netip.Prefix // range=; invalid when absent
	contains     bool         // contains=: range= selects the ranges that hold it (true, the default) or those inside it
	scope, value string       // scope= (lower case) and value=
	typ          string       // type=
}

func readSelection(q url.Values) (selection, error) {
	sel := selection{contains: true, scope: strings.ToLower(q.Get("scope")), value: q.Get("value"), typ: q.Get("type")}
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

func (sel selection) match(d lapiDecision) bool {
	switch {
	case sel.typ != "" && !strings.EqualFold(sel.typ, d.Type),
		sel.scope != "" && sel.scope != strings.ToLower(d.Scope),
		sel.value != "" && sel.value != d.Value,
		sel.ip.IsValid() && !d.prefix.Contains(sel.ip):
		return false
	case sel.rng.IsValid():
		p := d.prefix
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

// sortDecisions orders decisions by value, then id, so that an answer
// is the same for the same bans.
func sortDecisions(ds []lapiDecision) {
	slices.SortFunc(ds, func(a, b lapiDecision) int {
		if c := strings.Compare(a.Value, b.Value); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}
