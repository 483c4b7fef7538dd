package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/httpprotect/protect"
)

// MaxBody bounds the body of a request to the API, in bytes: 1 MiB
// holds MaxTargets of the longest targets (an IPv6 CIDR, 43 bytes, and
// its quotes and comma) with a reason of protect.MaxReasonLen. A longer
// body is refused, 413 (code too_large), before it is read whole.
const MaxBody = 1 << 20

// BanRequest is the body of POST /v1/bans. The zero value bans nothing.
type BanRequest struct {
	Targets []string `json:"targets"`
	// For is the ban's length as a Go duration ("90m", "60h"); "" means
	// the protector's BanDuration, unless Permanent.
	For       string `json:"for"`
	Permanent bool   `json:"permanent"`
	Reason    string `json:"reason"`
	By        string `json:"by"`
	// Force bans a CIDR wider than a /8 of IPv4 or a /16 of IPv6.
	Force bool `json:"force"`
}

// Handler serves the administration of the bans of ps, one service's
// protectors in the order it runs them, under /v1/, as JSON in
// protectctl's -json schema:
//
//	GET    /v1/protectors                   []ProtectorRecord
//	GET    /v1/bans?within=CIDR&source=auto|manual&limit=N   []BanRecord
//	       [&covers=ADDR][&q=TEXT][&reason=TEXT][&sort=KEY|-KEY][&offset=N]   a page, X-Total-Count: bans selected
//	POST   /v1/bans  (a BanRequest)         201, []BanRecord: the bans added
//	DELETE /v1/bans?target=T[&target=T...][&force=true][&by=WHO]   []BanRecord: the bans lifted
//	DELETE /v1/bans?all=true[&by=WHO]       every ban
//	GET    /v1/inspect?target=T             Inspection
//	GET    /v1/explain?remote=ADDR[&header=Name:%20value...]   Explanation
//	GET    /v1/check?addr=ADDR              CheckReport
//	GET    /v1/events?since=CURSOR&limit=N  EventRecords, one JSON line each
//	GET    /v1/events  (Accept: text/event-stream)   the journal, followed
//	GET    /v1/allows                       []BanRecord: the allowlist
//	POST   /v1/allows  (an AllowRequest)    201, AllowResult: the entries added, the bans lifted
//	DELETE /v1/allows?target=T[&target=T...]   []BanRecord: the entries removed
//
// An allowlist entry (store.Allowlist) is an address's counting key or a
// CIDR that is never counted nor banned while it lasts (Admin.Allow); a
// store without an allowlist is 501, code no_allowlist, and a ban of
// what an entry covers is 409, code allowed.
//
// Events are the ban list's journal (store.Journal): a store without one
// is 501, code no_journal; a cursor trimmed away is 410, code
// cursor_gone (read again without since); a service of several ban
// lists needs namespace. Followed, each event is a server-sent event
// whose id is its cursor (a reconnecting client's Last-Event-ID goes on
// from it), whose event is its kind and whose data is its EventRecord; an
// idle stream sends a comment line every few seconds.
//
// A listing of bans is sorted (sort: as ParseSort reads it, soonest
// expiry first by default) and cut to the page of limit bans after offset; q and
// reason keep the bans whose key or reason holds that text, ignoring
// case (q=consumer:NAME, a consumer's key as the dashboard shows it,
// the consumers' keys that hold NAME), and covers the bans that refuse an address (Filter.Covers). The
// X-Total-Count header counts the bans the filters select,
// whatever the page (Service.BansPage).
//
// A ban or a lift names at most MaxTargets targets, and a body holds at
// most MaxBody bytes: more is 413, code too_large, and nothing is
// written.
//
// Every path takes namespace=NS, which keeps the protectors whose
// Namespace or BanNamespace is NS (404, code unknown_namespace, when
// none has it); without it a request covers every protector: the bans of
// every ban list, each protector's counters. A lift reaches the next
// request: it is written to the store the protectors read.
//
// Errors are application/problem+json with a stable code (the Code
// constants): a request that does not parse is 400 and its detail quotes
// it; a store failure is 503, code store_unavailable, and its text goes
// to the protector's log, never to the client. A check is 200 whether or
// not something refuses the address: the report says (refused).
//
// Handler has no authentication of its own: whoever reaches it lists,
// bans and lifts. Mount it behind the service's own authentication, or
// serve it on a unix socket or a port only operators reach (protectd's
// HTTP_PROTECT_ADMIN_LISTEN demands a token on TCP).
func Handler(ps ...*protect.Protector) http.Handler {
	h := &handler{svc: NewService(ps...), log: slog.New(slog.DiscardHandler), poll: eventPoll}
	if len(ps) > 0 && ps[0] != nil && ps[0].Config().Logger != nil {
		h.log = ps[0].Config().Logger
	}
	return h.routes()
}

// routes is the API of h.
func (h *handler) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/protectors", h.protectors)
	mux.HandleFunc("GET /v1/bans", h.bans)
	mux.HandleFunc("POST /v1/bans", h.ban)
	mux.HandleFunc("DELETE /v1/bans", h.lift)
	mux.HandleFunc("GET /v1/inspect", h.inspect)
	mux.HandleFunc("GET /v1/explain", h.explain)
	mux.HandleFunc("GET /v1/check", h.check)
	mux.HandleFunc("GET /v1/events", h.events)
	mux.HandleFunc("GET /v1/allows", h.allows)
	mux.HandleFunc("POST /v1/allows", h.allow)
	mux.HandleFunc("DELETE /v1/allows", h.disallow)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// ServeMux's own 404 and 405 are text, and it redirects a path
		// that is not clean (a client would repeat a DELETE elsewhere);
		// the API answers each with a problem.
		if _, pattern := mux.Handler(r); pattern == "" || path.Clean(r.URL.Path) != r.URL.Path {
			if known(r.URL.Path) {
				WriteProblem(w, http.StatusMethodNotAllowed, CodeMethod, r.Method+" "+strconv.Quote(r.URL.Path)+": method not allowed")
				return
			}
			WriteProblem(w, http.StatusNotFound, CodeNotFound, strconv.Quote(r.URL.Path)+": no such path of the admin API (see /v1/protectors)")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// known reports a path the API serves with some method.
func known(path string) bool {
	switch path {
	case "/v1/protectors", "/v1/bans", "/v1/inspect", "/v1/explain", "/v1/check", "/v1/events", "/v1/allows":
		return true
	}
	return false
}

type handler struct {
	svc  *Service
	log  *slog.Logger
	poll time.Duration // how often a followed journal is read while nothing is new
}

// service is the part of the service r's namespace parameter selects.
func (h *handler) service(r *http.Request) (*Service, error) {
	return h.svc.Select(r.URL.Query().Get("namespace"))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func (h *handler) protectors(w http.ResponseWriter, r *http.Request) {
	svc, err := h.service(r)
	if err != nil {
		writeError(w, h.log, "protectors", err)
		return
	}
	recs, err := svc.Protectors(r.Context())
	if err != nil {
		writeError(w, h.log, "protectors", err)
		return
	}
	writeJSON(w, http.StatusOK, recs)
}

// ParseFilter reads the filters of GET /v1/bans, as protectctl bans takes
// them: within (a CIDR), source (auto or manual), limit (N ≥ 0).
func ParseFilter(within, source, limit string) (Filter, error) {
	var f Filter
	if within != "" {
		p, err := netip.ParsePrefix(within)
		if err != nil {
			return Filter{}, badf("within %q: not a CIDR", within)
		}
		f.Within = p.Masked()
	}
	switch protect.Source(source) {
	case "", protect.SourceAuto, protect.SourceManual:
		f.Source = protect.Source(source)
	default:
		return Filter{}, badf("source %q: want auto or manual", source)
	}
	n, err := count("limit", limit)
	if err != nil {
		return Filter{}, err
	}
	f.Limit = n
	return f, nil
}

// count reads a parameter that counts bans: "" is 0.
func count(name, v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badf("%s %q: want a number of at least 0", name, v)
	}
	return n, nil
}

// HeaderTotal is the header of a GET /v1/bans answer that counts the
// bans its filters select, before offset and limit cut the page.
const HeaderTotal = "X-Total-Count"

func (h *handler) bans(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := ParseFilter(q.Get("within"), q.Get("source"), q.Get("limit"))
	if err != nil {
		writeError(w, h.log, "bans", err)
		return
	}
	f.Sort = q.Get("sort") // BansPage checks it
	if f.Offset, err = count("offset", q.Get("offset")); err != nil {
		writeError(w, h.log, "bans", err)
		return
	}
	f.Match, f.Reason = q.Get("q"), q.Get("reason")
	if c := q.Get("covers"); c != "" {
		if f.Covers, err = ParseCheckAddr(c); err != nil {
			writeError(w, h.log, "bans", badf("covers %q: not an IP address", c))
			return
		}
	}
	svc, err := h.service(r)
	if err != nil {
		writeError(w, h.log, "bans", err)
		return
	}
	recs, total, err := svc.BansPage(r.Context(), f)
	if err != nil {
		writeError(w, h.log, "bans", err)
		return
	}
	w.Header().Set(HeaderTotal, strconv.Itoa(total))
	writeJSON(w, http.StatusOK, recs)
}

func (h *handler) ban(w http.ResponseWriter, r *http.Request) {
	var req BanRequest
	if !h.readBody(w, r, "ban", &req) {
		return
	}
	opt := protect.BanOptions{Permanent: req.Permanent, Reason: req.Reason, By: req.By, Force: req.Force}
	if req.For != "" {
		d, err := time.ParseDuration(req.For)
		if err != nil || d < time.Second || d > protect.MaxDuration {
			writeError(w, h.log, "ban", badf("for %q: want a duration from 1s to %v", req.For, protect.MaxDuration))
			return
		}
		if req.Permanent {
			writeError(w, h.log, "ban", badf("for %q and permanent exclude each other", req.For))
			return
		}
		opt.For = d
	}
	if len(req.Targets) > MaxTargets {
		writeTooMany(w, "ban", len(req.Targets))
		return
	}
	if len(req.Targets) == 0 {
		writeError(w, h.log, "ban", badf("targets: ban needs at least one TARGET (an address, a CIDR or consumer:NAME)"))
		return
	}
	svc, err := h.service(r)
	if err != nil {
		writeError(w, h.log, "ban", err)
		return
	}
	recs, err := svc.Ban(r.Context(), req.Targets, opt)
	if err != nil {
		writeErrorDone(w, h.log, "ban", err, recs)
		return
	}
	writeJSON(w, http.StatusCreated, recs)
}

// readBody decodes r's JSON body into v, refusing unknown fields and a
// body over MaxBody; false when it answered the request with the error.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request, what string, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var big *http.MaxBytesError
	switch {
	case err == nil:
		return true
	case errors.As(err, &big):
		WriteProblem(w, http.StatusRequestEntityTooLarge, CodeTooLarge,
			fmt.Sprintf("body: more than %d bytes; %s at most %d targets a request", MaxBody, what, MaxTargets))
	default:
		writeError(w, h.log, what, badf("body: want a JSON %s request: %v", what, err))
	}
	return false
}

// countParam counts the parameters named name in a raw query.
func countParam(raw, name string) int {
	n := 0
	for piece := range strings.SplitSeq(raw, "&") {
		if k, _, _ := strings.Cut(piece, "="); k == name {
			n++
		}
	}
	return n
}

// writeTooMany refuses a request naming more than MaxTargets targets.
func writeTooMany(w http.ResponseWriter, what string, n int) {
	WriteProblem(w, http.StatusRequestEntityTooLarge, CodeTooLarge,
		fmt.Sprintf("targets: %s takes at most %d targets a request, got %d: split them", what, MaxTargets, n))
}

// flag reads a boolean parameter: absent is false.
func flag(q map[string][]string, name string) (bool, error) {
	v := ""
	if vs := q[name]; len(vs) > 0 {
		v = vs[0]
	}
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badf("%s %q: want true or false", name, v)
	}
	return b, nil
}

func (h *handler) lift(w http.ResponseWriter, r *http.Request) {
	// Counted in the raw query: net/url drops a query of more than
	// 10,000 parameters whole, which would read as a lift of nothing.
	if n := countParam(r.URL.RawQuery, "target"); n > MaxTargets {
		writeTooMany(w, "lift", n)
		return
	}
	q := r.URL.Query()
	o := LiftOptions{Targets: q["target"], By: q.Get("by")}
	var err error
	if o.All, err = flag(q, "all"); err == nil {
		o.Force, err = flag(q, "force")
	}
	if err != nil {
		writeError(w, h.log, "lift", err)
		return
	}
	svc, err := h.service(r)
	if err != nil {
		writeError(w, h.log, "lift", err)
		return
	}
	recs, err := svc.Lift(r.Context(), o)
	if err != nil {
		writeErrorDone(w, h.log, "lift", err, recs)
		return
	}
	writeJSON(w, http.StatusOK, recs)
}

func (h *handler) inspect(w http.ResponseWriter, r *http.Request) {
	target := r.URL.Query().Get("target")
	if target == "" {
		writeError(w, h.log, "inspect", badf("target: inspect takes exactly one TARGET"))
		return
	}
	svc, err := h.service(r)
	if err != nil {
		writeError(w, h.log, "inspect", err)
		return
	}
	in, err := svc.Inspect(r.Context(), target, nil)
	if err != nil {
		writeError(w, h.log, "inspect", err)
		return
	}
	writeJSON(w, http.StatusOK, in)
}

func (h *handler) explain(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	remote := q.Get("remote")
	if remote == "" {
		writeError(w, h.log, "explain", badf("remote: explain needs -remote ADDR"))
		return
	}
	header := map[string][]string{}
	for _, line := range q["header"] {
		name, value, err := ParseHeader(line)
		if err != nil {
			writeError(w, h.log, "explain", badRequest{err})
			return
		}
		header[name] = append(header[name], value)
	}
	svc, err := h.service(r)
	if err != nil {
		writeError(w, h.log, "explain", err)
		return
	}
	ex, err := svc.Explain(r.Context(), remote, header)
	if err != nil {
		writeError(w, h.log, "explain", err)
		return
	}
	writeJSON(w, http.StatusOK, ex)
}

// ParseCheckAddr parses the address protectctl check and GET /v1/check
// take: an IP address, without a port or a prefix.
func ParseCheckAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		return netip.Addr{}, badf("addr %q: not an IP address", s)
	}
	return a, nil
}

func (h *handler) check(w http.ResponseWriter, r *http.Request) {
	addr, err := ParseCheckAddr(r.URL.Query().Get("addr"))
	if err != nil {
		writeError(w, h.log, "check", err)
		return
	}
	svc, err := h.service(r)
	if err != nil {
		writeError(w, h.log, "check", err)
		return
	}
	rep, err := svc.Check(r.Context(), addr)
	if err != nil {
		writeError(w, h.log, "check", err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
