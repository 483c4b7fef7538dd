package main

import (
	"crypto/rand"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/challenge"
)

// challengePagePath is where nginx's @protect_challenge location fetches
// the page of a client that /verify answered Challenged (with 401, as
// nginx's auth_request passes on no body): GET, with the client in
// X-Forwarded-For and the URI to return to in X-Original-URI.
const challengePagePath = "/challenge"

// challenger serves protectd's side of the challenge: the page (a nonce
// made under the protector's secret, for the client's key) and, through
// the protector's Middleware, the answers the page posts. nil when
// HTTP_PROTECT_CHALLENGE is off.
type challenger struct {
	c      *challenge.Challenger
	path   string       // the answer path, Challenge.Path
	answer http.Handler // the protector's Middleware, which answers path first
}

// challengeSecret gives cfg.Challenge a random secret when it has none,
// and logs that passes then end with the process: the protector and
// protectd's page must share one secret, so protectd makes it.
func challengeSecret(cfg *protect.Config, log *slog.Logger) {
	if cfg.Challenge == nil || len(cfg.Challenge.Secret) > 0 {
		return
	}
	cc := *cfg.Challenge
	cc.Secret = make([]byte, challenge.SecretSize)
	rand.Read(cc.Secret)
	cfg.Challenge = &cc
	log.Warn("HTTP_PROTECT_CHALLENGE_SECRET is not set: made a random one; passes end with this process, and other instances refuse them")
}

// newChallenger makes the challenger of p, whose complete Config has the
// challenge on; nil when it is off.
func newChallenger(p *protect.Protector) (*challenger, error) {
	cfg := p.Config()
	cc := cfg.Challenge
	if cc == nil {
		return nil, nil
	}
	c, _, err := challenge.New(challenge.Config{Secret: cc.Secret, Difficulty: cc.Difficulty,
		NonceTTL: cc.NonceTTL, PassTTL: cc.PassTTL, Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	notFound := http.HandlerFunc(http.NotFound)
	return &challenger{c: c, path: cc.Path, answer: p.Middleware(notFound)}, nil
}

// challenged answers /verify for d, Challenged: the page, with d's status
// (403) and the RateLimit fields, returning to the original URI; or,
// when the proxy asked for refusals with a status of its choice (nginx),
// 401 with no body, for its error_page to fetch the page from
// challengePagePath.
func (v *verifier) challenged(w http.ResponseWriter, r *http.Request, d *protect.Decision) {
	code := d.StatusCode()
	h := w.Header()
	h[hdrStatus] = []string{strconv.Itoa(code)}
	h[hdrCode] = []string{d.Status.Code()}
	v.logRefusal(r, slog.LevelInfo, refusalAttrs(*d, code)...)
	if refusalStatus(r) != 0 {
		d.WriteHeaders(h)
		h["Cache-Control"] = []string{"no-store"}
		h["Content-Length"] = zeroLength
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	_, uri := originalRequest(r)
	v.writePage(w, d, uri)
}

// writePage writes the page for d's key, returning to uri.
func (v *verifier) writePage(w http.ResponseWriter, d *protect.Decision, uri string) {
	d.WriteHeaders(w.Header())
	challenge.Page{
		Nonce:      v.chal.c.Nonce(d.Key.String()),
		Difficulty: v.chal.c.Difficulty(),
		Action:     v.chal.path,
		Return:     challenge.SafeReturn(uri),
	}.Write(w, d.StatusCode())
}

// servePage answers GET challengePagePath: the page for the client the
// proxy names, when it is still Challenged (checked, not counted: /verify
// counted the request); any other decision is answered as /verify would
// refuse it, or, when it may pass now, with a redirect to the original
// URI.
func (v *verifier) servePage(w http.ResponseWriter, r *http.Request) {
	d, _ := v.p.Check(r.Context(), r)
	_, uri := originalRequest(r)
	switch {
	case d.Status == protect.Challenged:
		v.writePage(w, &d, uri)
	case d.Refused():
		d.WriteResponse(w)
	default:
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, challenge.SafeReturn(uri), http.StatusSeeOther)
	}
}
