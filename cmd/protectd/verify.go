package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// The headers of the forward-auth exchange.
const (
	// A trusted proxy or gateway names the consumer and its plan in these,
	// after its own authentication.
	hdrConsumer = "X-Protect-Consumer"
	hdrPlan     = "X-Protect-Plan"
	// hdrRefusalStatus, sent by the proxy, asks for refusals with this
	// status (401 or 403) instead of their own: nginx's auth_request
	// understands no other. The real status is then in hdrStatus and the
	// body in hdrProblem, for nginx to answer with.
	hdrRefusalStatus = "X-Protect-Refusal-Status"
	// Answer headers, for the proxy to copy: the status the client is to
	// get (200 when it may pass), the problem code of a refusal, the key
	// that was counted, and (with hdrRefusalStatus) the problem body.
	hdrStatus  = "X-Protect-Status"
	hdrCode    = "X-Protect-Code"
	hdrKey     = "X-Protect-Key"
	hdrProblem = "X-Protect-Problem"
)

// Header values of every served answer, shared between responses (the
// server only reads them), so that serving allocates no more than it must.
var (
	statusOK   = []string{"200"}
	zeroLength = []string{"0"}
)

// maxLogged bounds each header value written to the log.
const maxLogged = 256

// verifier answers /verify.
type verifier struct {
	p     *protect.Protector
	plans map[string]*protect.Plan
	log   *slog.Logger
	keys  *keyValues
	// refused counts the keys /verify and the gRPC services refuse
	// most, for the dashboard; nil (counting nothing) without an admin
	// listener. Only refusals reach it: an allowed request costs it
	// nothing.
	refused *admin.Refused
	// chal serves the challenge (challenge.go); nil when it is off.
	chal *challenger
}

// newVerifier makes the protector of s, which logs to log.
func newVerifier(s settings, log *slog.Logger) (*verifier, error) {
	v := &verifier{plans: s.plans, log: log, keys: newKeyValues()}
	if s.admin.listen != "" {
		v.refused = admin.NewRefused(0, nil)
	}
	s.cfg.Logger = log
	s.cfg.ConsumerFunc = v.consumerFunc
	challengeSecret(&s.cfg, log)
	p, err := protect.New(s.cfg)
	if err != nil {
		return nil, err
	}
	v.p = p
	if v.chal, err = newChallenger(p); err != nil {
		p.Close()
		return nil, err
	}
	return v, nil
}

// consumerFunc is the protector's ConsumerFunc: the consumer and plan a
// trusted peer named. Headers from any other peer are ignored, and the
// client's address is counted instead: a client that reaches protectd
// directly (or through a proxy not in TrustedProxies) could otherwise
// name any consumer, to spread its requests over consumers it makes up,
// or to spend a paying customer's quota and have it refused.
func (v *verifier) consumerFunc(r *http.Request) (string, *protect.Plan, bool) {
	if !v.p.FromTrustedProxy(r) {
		return "", nil, false
	}
	id := r.Header.Get(hdrConsumer)
	if id == "" {
		return "", nil, false
	}
	return id, v.plans[r.Header.Get(hdrPlan)], true
}

func (v *verifier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	d, _ := v.p.Verify(r.Context(), r)
	// A consumer under a plan protectd does not know (Verify: Unknown,
	// ErrNoPlan) is refused, never let through unlimited nor moved to the
	// address limit: the gateway and protectd disagree, and only their
	// operator can settle it, so the answer is a 503 with its own code,
	// and an error in the log. Under DryRun it is logged and served, as
	// every refusal is.
	if d.Refused() && errors.Is(d.Err, protect.ErrNoPlan) {
		v.unknownPlan(w, r)
		return
	}
	if !d.Key.IsZero() {
		h[hdrKey] = v.keys.get(d.Key)
	}
	if !d.Refused() {
		d.WriteHeaders(h)
		h[hdrStatus] = statusOK
		h["Content-Length"] = zeroLength
		w.WriteHeader(http.StatusOK)
		return
	}
	code := d.StatusCode()
	h[hdrStatus] = []string{strconv.Itoa(code)}
	h[hdrCode] = []string{d.Status.Code()}
	v.logRefusal(r, slog.LevelInfo, refusalAttrs(d, code)...)
	v.countRefusal(d)
	if d.Status == protect.Challenged && v.chal != nil {
		v.challenged(w, r, &d)
		return
	}
	refusal := refusalStatus(r)
	if refusal == 0 {
		d.WriteResponse(w)
		return
	}
	var body bytes.Buffer
	d.WriteResponse(&recorder{h: h, body: &body})
	respond(w, refusal, body.Bytes())
}

// countRefusal counts a refusal's key for the dashboard's keys refused
// most (nothing without an admin listener, or for a refusal of no key).
func (v *verifier) countRefusal(d protect.Decision) {
	if v.refused != nil && !d.Key.IsZero() {
		v.refused.Add(d.Key.String(), d.Status)
	}
}

// refusalAttrs are the attributes of d's "refused" log line, answered
// with status code; the gRPC services log them too.
func refusalAttrs(d protect.Decision, code int) []slog.Attr {
	attrs := []slog.Attr{
		slog.Int("status", code),
		slog.String("decision", d.Status.String()),
		slog.String("code", d.Status.Code()),
		slog.Any("client", d.Addr),
		slog.Any("key", d.Key),
		slog.Int64("retry_after", ceilSeconds(d.RetryAfter.Seconds())),
	}
	if d.Policy != "" {
		attrs = append(attrs, slog.String("policy", d.Policy))
	}
	if (d.Status == protect.Blocked || d.Status == protect.Challenged) && d.Ban != nil { // which list, and which of its entries
		attrs = append(attrs, slog.String("list", d.Ban.By), slog.Any("entry", d.Ban.Key))
	}
	if d.Err != nil {
		attrs = append(attrs, slog.String("err", d.Err.Error()))
	}
	return attrs
}

// unknownPlan refuses a consumer whose plan is not in the plans file.
func (v *verifier) unknownPlan(w http.ResponseWriter, r *http.Request) {
	const code = http.StatusServiceUnavailable
	body := []byte(`{"type":"about:blank","title":"Service Unavailable","status":503,"code":"unknown_plan",` +
		`"detail":"The plan this request was sent under is not configured. The operator has been told."}` + "\n")
	v.logRefusal(r, slog.LevelError,
		slog.Int("status", code),
		slog.String("decision", "unknown_plan"),
		slog.String("code", "unknown_plan"),
		slog.String("plan", clip(r.Header.Get(hdrPlan))))
	h := w.Header()
	h[hdrStatus] = []string{strconv.Itoa(code)}
	h[hdrCode] = []string{"unknown_plan"}
	h["Cache-Control"] = []string{"no-store"}
	h["Content-Type"] = []string{"application/problem+json"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	if refusal := refusalStatus(r); refusal != 0 {
		respond(w, refusal, body)
		return
	}
	w.WriteHeader(code)
	w.Write(body)
}

// respond answers a proxy that asked for refusals with status refusal:
// the problem body goes in hdrProblem too, since nginx drops the body of
// an auth answer.
func respond(w http.ResponseWriter, refusal int, body []byte) {
	w.Header()[hdrProblem] = []string{string(bytes.TrimSpace(body))}
	w.WriteHeader(refusal)
	w.Write(body)
}

// refusalStatus is the status a proxy asked refusals to be answered with:
// 401 or 403, else 0 (each refusal's own).
func refusalStatus(r *http.Request) int {
	switch r.Header.Get(hdrRefusalStatus) {
	case "401":
		return http.StatusUnauthorized
	case "403":
		return http.StatusForbidden
	}
	return 0
}

// logRefusal writes the one log line of a refusal, with the original
// request as the proxy reports it. Those headers are only logged, never
// believed for a decision; each is cut to maxLogged bytes, and slog's JSON
// escapes whatever they hold.
func (v *verifier) logRefusal(r *http.Request, level slog.Level, attrs ...slog.Attr) {
	method, uri := originalRequest(r)
	attrs = append(attrs, slog.String("method", clip(method)), slog.String("uri", clip(uri)))
	v.log.LogAttrs(context.WithoutCancel(r.Context()), level, "refused", attrs...)
}

// originalRequest is the method and URI of the request the proxy asks
// about: nginx sends them as we configure it (X-Original-Method,
// X-Original-URI), Traefik and Caddy as X-Forwarded-Method and
// X-Forwarded-Uri, and Envoy asks with the original method and the
// original path appended to /verify.
func originalRequest(r *http.Request) (method, uri string) {
	method, uri = r.Header.Get("X-Original-Method"), r.Header.Get("X-Original-URI")
	if method == "" {
		method = r.Header.Get("X-Forwarded-Method")
	}
	if uri == "" {
		uri = r.Header.Get("X-Forwarded-Uri")
	}
	if method == "" {
		method = r.Method
	}
	if uri == "" {
		if rest, ok := strings.CutPrefix(r.URL.RequestURI(), verifyPath); ok && rest != "" && rest[0] == '/' {
			uri = rest
		}
	}
	return method, uri
}

func clip(s string) string {
	if len(s) > maxLogged {
		return s[:maxLogged] + "…"
	}
	return s
}

// ceilSeconds rounds up, as Retry-After does.
func ceilSeconds(s float64) int64 {
	n := int64(s)
	if float64(n) < s {
		n++
	}
	return n
}

// recorder is the http.ResponseWriter a refusal is written into when the
// proxy needs it answered with another status: headers go to h, the body
// to body, and the status is dropped (hdrStatus has it).
type recorder struct {
	h    http.Header
	body *bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) WriteHeader(int)             {}
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
