package main

import (
	"crypto/rand"
	"log/slog"
	"net/http"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/challenge"
	"github.com/httpprotect/protect/internal/clientaddr"
)

// challengePagePath is where nginx's @protect_challenge location fetches
// the page of a client that /verify answered Challenged (with 401, as
// nginx's auth_request passes on no body): GET, with the key /verify
// answered in X-Protect-Key and the URI to return to in X-Original-URI.
const challengePagePath = "/challenge"

// challenger serves protectd's side of the challenge: the page (a nonce
// made under the protector's secret, for the client's key) and, through
// the protector's Middleware, the answers the page posts. nil when
// HTTP_PROTECT_CHALLENGE is off.
type challenger struct {
	c      *challenge.Challenger
	path   string       // the answer path, Challenge.Path
	answer http.Handler // the protector's Middleware, which answers path first
	agg    clientaddr.Aggregator
}

// key is the key d's challenge is bound to: the client address's, as
// the protector binds it under a ConsumerFunc (protectd's always is), for
// the answer comes without the gateway's consumer headers.
func (c *challenger) key(d *protect.Decision) protect.Key {
	if d.Addr.IsValid() {
		return c.agg.Key(d.Addr)
	}
	return d.Key
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
	agg := clientaddr.Aggregator{V4Bits: cfg.IPv4Prefix, V6Bits: cfg.IPv6Prefix}
	return &challenger{c: c, path: cc.Path, answer: p.Middleware(notFound), agg: agg}, nil
}

// challenged answers /verify for d, Challenged, once ServeHTTP has
// written and counted the refusal: the page, with d's status (403) and
// the RateLimit fields, returning to the original URI; or, when the proxy
// asked for refusals with a status of its choice (nginx), 401 with no
// body, for its error_page to fetch the page from challengePagePath.
func (v *verifier) challenged(w http.ResponseWriter, r *http.Request, d *protect.Decision) {
	// The page, and the one nginx fetches by X-Protect-Key, are for the
	// key the challenge is bound to.
	k := v.chal.key(d)
	h := w.Header()
	h[hdrKey] = v.keys.get(k)
	if refusalStatus(r) != 0 {
		d.WriteHeaders(h)
		h["Cache-Control"] = []string{"no-store"}
		h["Content-Length"] = zeroLength
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	_, uri := originalRequest(r)
	v.writePage(w, d, k, uri)
}

// writePage writes the page for d's challenge key k, returning to uri.
func (v *verifier) writePage(w http.ResponseWriter, d *protect.Decision, k protect.Key, uri string) {
	d.WriteHeaders(w.Header())
	v.chal.page(k.String(), uri).Write(w, d.StatusCode())
}

// page is the page for key, returning to uri.
func (c *challenger) page(key, uri string) challenge.Page {
	return challenge.Page{Nonce: c.c.Nonce(key), Difficulty: c.c.Difficulty(), Action: c.path, Return: challenge.SafeReturn(uri)}
}

// servePage answers GET challengePagePath: the page for the key that
// /verify counted, which the proxy copied from its X-Protect-Key, and
// the URI to return to in X-Original-URI. It checks and counts nothing:
// /verify did. Only a trusted proxy may ask; a page made for a key that
// is not the client's is of no use to it, since the answer path checks
// the nonce's key against the client's (and counts a failure).
func (v *verifier) servePage(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(hdrKey)
	if !v.p.FromTrustedProxy(r) || key == "" || len(key) > challenge.MaxKeyLen {
		http.Error(w, "a page is made for the key of a check: ask from a trusted proxy, with X-Protect-Key", http.StatusBadRequest)
		return
	}
	_, uri := originalRequest(r)
	v.chal.page(key, uri).Write(w, http.StatusForbidden)
}
