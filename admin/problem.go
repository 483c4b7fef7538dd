package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/httpprotect/protect"
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
	CodeUnauthorized     = "unauthorized"      // 401: a missing or wrong token (protectd's listener)
	CodeStoreUnavailable = "store_unavailable" // 503: the store failed; its text is logged, not sent
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
}

// Error makes a Problem an error, as a client of the API reports it.
func (p *Problem) Error() string { return p.Detail }

// WriteProblem writes an application/problem+json error.
func WriteProblem(w http.ResponseWriter, status int, code, detail string) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Code: code, Detail: detail})
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
	var br badRequest
	switch {
	case errors.Is(err, ErrUnknownNamespace):
		WriteProblem(w, http.StatusNotFound, CodeUnknownNamespace, err.Error())
	case errors.Is(err, protect.ErrWideTarget):
		WriteProblem(w, http.StatusBadRequest, CodeWideTarget, err.Error())
	case errors.Is(err, protect.ErrBadTarget):
		WriteProblem(w, http.StatusBadRequest, CodeBadTarget, err.Error())
	case errors.Is(err, ErrNoTarget):
		WriteProblem(w, http.StatusBadRequest, CodeNoTarget, err.Error())
	case errors.As(err, &br), errors.Is(err, protect.ErrReasonTooLong):
		WriteProblem(w, http.StatusBadRequest, CodeBadRequest, err.Error())
	default:
		log.Error("admin: "+what+" failed", "err", err.Error())
		WriteProblem(w, http.StatusServiceUnavailable, CodeStoreUnavailable, what+": the store did not answer; the service's log has the error")
	}
}
