package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/store"
)

// Problem codes of the admin API, in the "code" member of its
// application/problem+json errors. They are stable: clients branch on
// them, never on the text.
const (
	CodeBadRequest       = "bad_request"       // 400: a parameter or body that does not parse
	CodeBadTarget        = "bad_target"        // 400: not an address, a CIDR or consumer:NAME
	CodeWideTarget       = "wide_target"       // 400: a CIDR too wide without force
	CodeNoTarget         = "no_target"         // 400: a lift of nothing, without all=true
	CodeUnknownNamespace = "unknown_namespace" // 404: no protector has the namespace asked for
	CodeNotFound         = "not_found"         // 404: no such path
	CodeMethod           = "method_not_allowed"
	CodeTooLarge         = "too_large"         // 413: more than MaxTargets targets, or a body over MaxBody
	CodeUnauthorized     = "unauthorized"      // 401: a missing or wrong token (protectd's listener)
	CodeStoreUnavailable = "store_unavailable" // 503: the store failed; its text is logged, not sent
	CodeCursorGone       = "cursor_gone"       // 410: events since a cursor the journal trimmed away
	CodeNoJournal        = "no_journal"        // 501: events of a store that keeps no journal
	CodeNoAllowlist      = "no_allowlist"      // 501: allows of a store that keeps no allowlist
	CodeAllowed          = "allowed"           // 409: a ban of what the allowlist covers
	CodeForbidden        = "forbidden"         // 403: a dashboard write without its CSRF token, or from another origin
	CodeInternal         = "internal"          // 500: the dashboard cannot serve its pages
)

// Problem is the body of an admin API error (RFC 9457).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	// Detail says what was wrong with the request, quoting it; for a
	// store failure, only that the store failed.
	Detail string `json:"detail"`
	// Done holds, for a ban or a lift that failed part way, the bans it
	// wrote or lifted before the failure, as the answer of one that
	// succeeded would: a failure does not mean that nothing changed.
	// Empty (and absent) otherwise.
	Done []BanRecord `json:"done,omitempty"`
}

// Error makes a Problem an error, as a client of the API reports it.
func (p *Problem) Error() string { return p.Detail }

// WriteProblem writes an application/problem+json error.
func WriteProblem(w http.ResponseWriter, status int, code, detail string) {
	writeProblem(w, Problem{Status: status, Code: code, Detail: detail})
}

func writeProblem(w http.ResponseWriter, p Problem) {
	p.Type, p.Title = "about:blank", http.StatusText(p.Status)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	json.NewEncoder(w).Encode(p)
}

// ErrBadRequest is wrapped by the errors of the parsers here (ParseFilter,
// ParseCheckAddr) and of the API for a request that does not parse.
var ErrBadRequest = errors.New("admin: bad request")

// badRequest is an error in what the client sent: its text quotes it and
// goes back to the client.
type badRequest struct{ err error }

func (e badRequest) Error() string        { return e.err.Error() }
func (e badRequest) Unwrap() error        { return e.err }
func (e badRequest) Is(target error) bool { return target == ErrBadRequest }

func badf(format string, args ...any) error { return badRequest{fmt.Errorf(format, args...)} }

// writeError answers err. Errors in the request are 400 (404 for a
// namespace) with their text, which quotes what was sent. Anything else
// is the store's: 503, logged with its text and answered without it, for
// a store error may name hosts, users and keys the caller need not see.
func writeError(w http.ResponseWriter, log *slog.Logger, what string, err error) {
	writeErrorDone(w, log, what, err, nil)
}

// writeErrorDone is writeError for a ban or a lift that did done before
// it failed.
func writeErrorDone(w http.ResponseWriter, log *slog.Logger, what string, err error, done []BanRecord) {
	p := Problem{Status: http.StatusBadRequest, Detail: err.Error(), Done: done}
	var br badRequest
	switch {
	case errors.Is(err, ErrUnknownNamespace):
		p.Status, p.Code = http.StatusNotFound, CodeUnknownNamespace
	case errors.Is(err, protect.ErrWideTarget):
		p.Code = CodeWideTarget
	case errors.Is(err, protect.ErrBadTarget):
		p.Code = CodeBadTarget
	case errors.Is(err, ErrNoTarget):
		p.Code = CodeNoTarget
	case errors.Is(err, ErrTooManyTargets):
		p.Status, p.Code = http.StatusRequestEntityTooLarge, CodeTooLarge
	case errors.Is(err, ErrCursorGone):
		p.Status, p.Code = http.StatusGone, CodeCursorGone
	case errors.Is(err, ErrNoJournal):
		p.Status, p.Code = http.StatusNotImplemented, CodeNoJournal
	case errors.Is(err, ErrNoAllowlist):
		p.Status, p.Code = http.StatusNotImplemented, CodeNoAllowlist
	case errors.Is(err, store.ErrAllowed):
		p.Status, p.Code = http.StatusConflict, CodeAllowed
	case errors.Is(err, store.ErrNotAllowable):
		p.Code = CodeBadTarget
	case errors.As(err, &br), errors.Is(err, protect.ErrReasonTooLong), errors.Is(err, store.ErrBadCursor):
		p.Code = CodeBadRequest
	default:
		log.Error("admin: "+what+" failed", "err", err.Error(), "done", len(done))
		p.Status, p.Code = http.StatusServiceUnavailable, CodeStoreUnavailable
		p.Detail = what + ": the store did not answer; the service's log has the error"
		if len(done) > 0 {
			p.Detail = fmt.Sprintf("%s: the store failed after %d of the bans; the service's log has the error", what, len(done))
		}
	}
	writeProblem(w, p)
}
