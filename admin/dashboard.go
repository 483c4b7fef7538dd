package admin

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/httpprotect/protect"
)

// SessionCookie is the name of the dashboard's session cookie.
const SessionCookie = "protect_session"

// HeaderCSRF is the header a write from the dashboard carries its
// session's CSRF token in.
const HeaderCSRF = "X-CSRF-Token"

// DefaultSessionLength is how long a login lasts when
// DashboardConfig.SessionLength is 0.
const DefaultSessionLength = 12 * time.Hour

const (
	dashboardCSP          = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	sessionPayloadLen     = 8 + 16 // the expiry (Unix seconds) and a random nonce
	maxLoginForm          = 4 << 10
	dashboardRefusedShown = 20 // keys on the now page
)

//go:embed ui
var ui embed.FS

// DashboardConfig configures Dashboard. The zero value serves the
// dashboard and the API to whoever reaches them, as Handler does, with
// no refused keys shown.
type DashboardConfig struct {
	// Token is the admin token. An API client sends it as
	// "Authorization: Bearer <token>"; a browser enters it once in the
	// login form and keeps a session cookie signed with a key derived
	// from it (changing the token ends every session). "" asks no
	// token: every request is let through, as Handler lets it, and the
	// login form lets in whoever submits it, for a dashboard mounted
	// behind the service's own authentication; a browser's write must
	// still come from the dashboard's origin.
	Token string
	// Refused, when not nil, is shown on the "now" page: the keys
	// refused most.
	Refused *Refused
	// SessionLength is how long a login lasts; 0 is
	// DefaultSessionLength.
	SessionLength time.Duration
	// Clock tells the time of sessions; nil is time.Now.
	Clock func() time.Time
	// Logger gets a line for each login and each refused one; nil is the
	// first protector's Config.Logger.
	Logger *slog.Logger
	// Origins are the origins (scheme://host[:port], as ParseOrigin
	// reads them) a browser opens the dashboard at, for a dashboard
	// behind a proxy that terminates TLS or rewrites Host, such as
	// "https://admin.example.com". When set, a login and a write from a
	// browser must come from one of them (its Origin header), and the
	// session cookie is Secure when that origin is https. An entry
	// ParseOrigin refuses matches nothing and is logged. nil: the origin
	// is the request's own, http or https as it came, http://Host; and
	// without a Token a browser's request must name a loopback Host.
	Origins []string
}

// ParseOrigin checks an origin of DashboardConfig.Origins: scheme://host
// with an optional :port, scheme http or https, and nothing after the
// host (no path, query or user). It returns it as a browser sends it in
// an Origin header: lower case, without the scheme's default port.
func ParseOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("origin %q: %w", s, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("origin %q: %w", s, errBadOrigin)
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" || strings.HasSuffix(u.Host, ":") {
		return "", fmt.Errorf("origin %q: %w", s, errBadOrigin)
	}
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, nil
}

var errBadOrigin = errors.New("want scheme://host[:port], scheme http or https, nothing after the host")

// Dashboard serves the web dashboard of ps at / and the admin API
// (Handler) under /v1/, behind the token of cfg:
//
//	GET  /                 the dashboard (pages now, bans, allows, lists,
//	                       events), or the login form without a session
//	POST /login            token=T: a session cookie, or 401 and the form again
//	POST /logout           ends the session in this browser
//	GET  /ui/now           the counters the "now" page draws, as JSON
//	GET  /assets/...       the dashboard's script and style sheet
//	/v1/...                the admin API, as Handler
//
// A request to the API or to /ui/ is let through with the bearer token,
// or with the session cookie; without either it is 401, code
// unauthorized, and a wrong bearer token is 401 whatever cookie comes
// with it (and GET / shows it the login form). An Authorization header
// of another scheme, such as a proxy's Basic credentials, leaves the
// cookie to decide. The session cookie is HttpOnly, SameSite=Strict,
// Secure over TLS or for an https origin of cfg.Origins, and signed
// (HMAC-SHA256 of its expiry and a random nonce), so the server keeps no
// sessions. A write that a cookie authenticates (any method but GET and
// HEAD, and POST /logout) must carry the session's CSRF token in the
// X-CSRF-Token header, and come from the dashboard's own origin
// (Sec-Fetch-Site same-origin, Origin one of cfg.Origins, or without
// them the request's own): otherwise it is 403, code forbidden, and
// nothing is written. A login must come from the same origin too. A
// read without the bearer token from a page of another origin
// (Sec-Fetch-Site same-site or cross-site) is 403: a listing reads the
// whole store. A session's events stream ends when the session does.
// Without a token, a browser's request must name a loopback Host,
// localhost or the host of one of cfg.Origins (DNS rebinding); any other
// is 403.
//
// The pages name every path relative to the page, so the dashboard may
// be mounted under a prefix: mux.Handle("/admin/",
// http.StripPrefix("/admin", admin.Dashboard(cfg, ps...))), opened at
// /admin/ (with the slash).
//
// The assets are embedded (no CDN, no build step) and every answer
// carries a Content-Security-Policy that allows no inline script or
// style: one script, one style sheet, and fetches to this origin.
//
// The "now" page polls /ui/now every second and draws the decisions per
// second by status from the difference of two snapshots of
// protect.Protector.Stats: the server keeps no history, and the chart
// starts when the page opens, its window growing from a minute to the
// last five.
//
// Logging out clears the cookie in the browser, and this dashboard
// refuses a copy of it until it would have expired (a stream it opened
// ends at its next write); another process serving the same token, or
// this one after a restart, knows nothing of the logout.
func Dashboard(cfg DashboardConfig, ps ...*protect.Protector) http.Handler {
	d := &dashboard{cfg: cfg, api: Handler(ps...), log: slog.New(slog.DiscardHandler)}
	d.pages, d.pagesErr = template.ParseFS(ui, "ui/*.html")
	if d.cfg.SessionLength <= 0 {
		d.cfg.SessionLength = DefaultSessionLength
	}
	if d.cfg.Clock == nil {
		d.cfg.Clock = time.Now
	}
	switch {
	case cfg.Logger != nil:
		d.log = cfg.Logger
	case len(ps) > 0 && ps[0] != nil && ps[0].Config().Logger != nil:
		d.log = ps[0].Config().Logger
	}
	if cfg.Token != "" {
		d.want = sha256.Sum256([]byte(cfg.Token))
		key := hmac.New(sha256.New, []byte("protect dashboard session"))
		key.Write([]byte(cfg.Token))
		d.key = key.Sum(nil)
	} else {
		d.key = make([]byte, 32)
		rand.Read(d.key) // never fails (crypto/rand)
	}
	for _, p := range ps {
		if p != nil {
			d.ps = append(d.ps, p)
		}
	}
	for _, o := range cfg.Origins {
		origin, err := ParseOrigin(o)
		if err != nil {
			d.log.Error("admin dashboard: an origin that matches nothing", "err", err.Error())
			continue
		}
		d.origins = append(d.origins, origin)
		if u, err := url.Parse(origin); err == nil {
			d.hosts = append(d.hosts, u.Host)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.index)
	mux.HandleFunc("POST /login", d.login)
	mux.HandleFunc("POST /logout", d.logout)
	mux.HandleFunc("GET /ui/now", d.now)
	sub, _ := fs.Sub(ui, "ui") // a valid path: no error
	mux.Handle("GET /assets/", http.FileServerFS(sub))
	d.mux = mux
	return d
}

type dashboard struct {
	cfg  DashboardConfig
	api  http.Handler
	ps   []*protect.Protector
	log  *slog.Logger
	want [sha256.Size]byte // the token's digest
	key  []byte            // signs sessions and CSRF tokens
	mux  *http.ServeMux

	origins []string // cfg.Origins, as ParseOrigin returns them
	hosts   []string // their host[:port]

	mu      sync.Mutex
	revoked map[string]time.Time // sessions logged out here, until their end

	pages    *template.Template // ui/*.html
	pagesErr error              // parsing them
}

func (d *dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // no-referrer would make a form's Origin "null"
	h.Set("X-Frame-Options", "DENY")
	if !d.hostOK(r) {
		d.log.Warn("admin dashboard: request refused: a browser's Host that is not the dashboard's", "host", r.Host, "path", r.URL.Path)
		WriteProblem(w, http.StatusForbidden, CodeForbidden, "without a token a browser must open the dashboard at a loopback address, localhost, or one of its configured origins")
		return
	}
	if api := strings.HasPrefix(r.URL.Path, "/v1/"); api || strings.HasPrefix(r.URL.Path, "/ui/") {
		session, bearer, ok := d.authorized(w, r)
		if !ok {
			return
		}
		write := r.Method != "GET" && r.Method != "HEAD"
		switch {
		case write && session != "":
			if !d.sameOrigin(w, r, session) {
				return
			}
		case write && !bearer && d.cfg.Token == "" && !d.fromOrigin(r):
			// Without a token every request is let through, but not a
			// browser's from another page: the service's own cookie
			// would go with it.
			WriteProblem(w, http.StatusForbidden, CodeForbidden, "a write from a browser must come from the dashboard's own origin")
			return
		case !bearer && !readableSite(r):
			// A read costs a whole store's scan: a page of another
			// origin of the same site (another port of the host), which
			// SameSite=Strict sends the cookie from, must not run them.
			d.log.Warn("admin dashboard: read refused: from another page", "path", r.URL.Path, "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
			WriteProblem(w, http.StatusForbidden, CodeForbidden, "a read with the session cookie must come from the dashboard's own page (Sec-Fetch-Site same-origin or none)")
			return
		}
		if api {
			if session != "" && r.URL.Path == "/v1/events" {
				d.streamWithin(w, r, session)
				return
			}
			d.api.ServeHTTP(w, r)
			return
		}
	}
	d.mux.ServeHTTP(w, r)
}

// readableSite reports whether a browser's Sec-Fetch-Site lets a read
// through: same-origin, none (the address bar, a bookmark), or absent
// (a tool, an older browser).
func readableSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	}
	return false
}

// bearerToken returns the token of r's Authorization header when its
// scheme is Bearer (any case, as HTTP's schemes are), and false for no
// header or another scheme: a proxy's own Basic credentials in front of
// the dashboard are not the admin token, and leave the session cookie
// to decide.
func bearerToken(r *http.Request) (string, bool) {
	auth, ok := r.Header["Authorization"]
	if !ok {
		return "", false
	}
	scheme, tok, _ := strings.Cut(strings.Join(auth, ","), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return tok, true
}

// authorized lets through a request with the bearer token or a session
// cookie, returning the cookie's value ("" for none) and whether the
// bearer token let it through; it answers any other with 401 and false.
// A Bearer Authorization header decides alone: a wrong one is 401
// whatever cookie comes with it. Another scheme, or none, leaves it to
// the cookie. Without a token every request is let through.
func (d *dashboard) authorized(w http.ResponseWriter, r *http.Request) (session string, bearer, ok bool) {
	if tok, isBearer := bearerToken(r); isBearer {
		if d.tokenOK(tok) {
			return "", true, true
		}
	} else if c, err := r.Cookie(SessionCookie); err == nil && d.sessionOK(c.Value) {
		return c.Value, false, true
	} else if d.cfg.Token == "" { // everyone, as Handler; a session still binds a CSRF token
		return "", false, true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="protect admin"`)
	WriteProblem(w, http.StatusUnauthorized, CodeUnauthorized, "missing or wrong bearer token or session (Authorization: Bearer; protectctl -token; or log in at /)")
	return "", false, false
}

// tokenOK compares a token with the admin token in constant time, on
// digests of equal length so that not even its length leaks; without an
// admin token, every token is right.
func (d *dashboard) tokenOK(got string) bool {
	if d.cfg.Token == "" {
		return true
	}
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], d.want[:]) == 1
}

// sameOrigin checks that a write authenticated by the session cookie
// comes from the dashboard itself: its CSRF token, and a browser's word
// that the request is of the same origin. It answers any other with
// 403 and false.
func (d *dashboard) sameOrigin(w http.ResponseWriter, r *http.Request, session string) bool {
	got := r.Header.Get(HeaderCSRF)
	if !d.fromOrigin(r) || !hmac.Equal([]byte(got), []byte(d.csrf(session))) {
		d.log.Warn("admin dashboard: write refused: not from the dashboard's own page", "method", r.Method, "path", r.URL.Path,
			"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "csrf_token", got != "")
		WriteProblem(w, http.StatusForbidden, CodeForbidden, "a write with the session cookie needs the dashboard's CSRF token and its own origin")
		return false
	}
	return true
}

// fromOrigin reports whether a browser says r comes from a page of the
// dashboard: Sec-Fetch-Site same-origin (or absent, from an older
// browser or a tool), and an Origin, when there is one, that is one of
// the configured origins, or without them of r's scheme and host.
func (d *dashboard) fromOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if len(d.origins) > 0 {
		o, err := ParseOrigin(origin)
		return err == nil && slices.Contains(d.origins, o)
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return origin == scheme+r.Host
}

// hostOK reports whether r may be served for the Host it names. Without
// a token, a page on any name that resolves to the listener (DNS
// rebinding) would be of the dashboard's own origin, and let in by the
// checks of origin: so a request that looks like a browser's must name a
// loopback address, localhost, or the host of a configured origin. A
// tool's (no Origin, Sec-Fetch-*, Cookie or browser User-Agent) goes
// through: protectctl names "unix" on a socket. With a token a rebinding
// page has no session (the cookie belongs to the dashboard's name, and a
// login needs the token), so the Host is not checked.
func (d *dashboard) hostOK(r *http.Request) bool {
	if d.cfg.Token != "" || !fromBrowser(r) {
		return true
	}
	host := strings.ToLower(r.Host)
	if slices.Contains(d.hosts, host) {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// fromBrowser reports whether r carries what only a browser sends.
func fromBrowser(r *http.Request) bool {
	h := r.Header
	return h.Get("Origin") != "" || h.Get("Sec-Fetch-Site") != "" || h.Get("Sec-Fetch-Mode") != "" ||
		h.Get("Cookie") != "" || strings.HasPrefix(h.Get("User-Agent"), "Mozilla/")
}

// secure reports whether the session cookie r gets is Secure: over TLS,
// or when the browser's origin (its Origin, or without one any
// configured origin) is https, as behind a proxy that terminates TLS.
func (d *dashboard) secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if o := r.Header.Get("Origin"); o != "" && len(d.origins) > 0 {
		return strings.HasPrefix(strings.ToLower(o), "https://")
	}
	for _, o := range d.origins {
		if strings.HasPrefix(o, "https://") {
			return true
		}
	}
	return false
}

// newSession returns a signed session cookie's value that ends at exp.
func (d *dashboard) newSession(exp time.Time) string {
	payload := make([]byte, sessionPayloadLen)
	binary.BigEndian.PutUint64(payload, uint64(exp.Unix()))
	rand.Read(payload[8:])
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(d.sign("session", payload))
}

// sessionOK reports whether v is a session this dashboard signed that
// has not ended.
func (d *dashboard) sessionOK(v string) bool {
	exp, ok := d.sessionEnd(v)
	return ok && d.cfg.Clock().Before(exp) && !d.isRevoked(v)
}

// maxRevoked bounds the sessions a dashboard remembers as logged out:
// past it, the one that ends soonest is forgotten (and valid again until
// its end, as every session was before logouts were remembered).
const maxRevoked = 4096

// revoke remembers that session, which ends at end, was logged out: it
// is refused until then, on this dashboard (not on another process
// serving the same token, nor after a restart).
func (d *dashboard) revoke(session string, end time.Time) {
	now := d.cfg.Clock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.revoked == nil {
		d.revoked = make(map[string]time.Time)
	}
	if len(d.revoked) >= maxRevoked { // rare: a scan at a logout
		soonest := ""
		for s, e := range d.revoked {
			if !now.Before(e) {
				delete(d.revoked, s)
			} else if soonest == "" || e.Before(d.revoked[soonest]) {
				soonest = s
			}
		}
		if len(d.revoked) >= maxRevoked {
			delete(d.revoked, soonest)
		}
	}
	d.revoked[session] = end
}

func (d *dashboard) isRevoked(session string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.revoked[session]
	return ok
}

// sessionEnd returns when v, a session this dashboard signed, ends; false
// for any other v.
func (d *dashboard) sessionEnd(v string) (time.Time, bool) {
	p, s, ok := strings.Cut(v, ".")
	if !ok {
		return time.Time{}, false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	sig, err2 := base64.RawURLEncoding.DecodeString(s)
	if err1 != nil || err2 != nil || len(payload) != sessionPayloadLen || !hmac.Equal(sig, d.sign("session", payload)) {
		return time.Time{}, false
	}
	exp := int64(binary.BigEndian.Uint64(payload) & (1<<63 - 1))
	return time.Unix(exp, 0), true
}

// csrf is the CSRF token of a session.
func (d *dashboard) csrf(session string) string {
	return base64.RawURLEncoding.EncodeToString(d.sign("csrf", []byte(session)))
}

func (d *dashboard) sign(purpose string, b []byte) []byte {
	m := hmac.New(sha256.New, d.key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write(b)
	return m.Sum(nil)
}

// page writes one of the HTML pages.
func (d *dashboard) page(w http.ResponseWriter, status int, name string, data any) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	if d.pagesErr != nil {
		d.log.Error("admin dashboard: pages", "err", d.pagesErr.Error())
		WriteProblem(w, http.StatusInternalServerError, CodeInternal, "the dashboard's pages do not parse")
		return
	}
	w.WriteHeader(status)
	if err := d.pages.ExecuteTemplate(w, name, data); err != nil {
		d.log.Error("admin dashboard: page", "page", name, "err", err.Error())
	}
}

// loginPage is what the login form shows.
type loginPage struct{ Error string }

func (d *dashboard) index(w http.ResponseWriter, r *http.Request) {
	// The rule of the API: a Bearer header decides alone, so that the
	// page is never served to a browser whose every call is 401.
	if tok, bearer := bearerToken(r); bearer && !d.tokenOK(tok) {
		d.page(w, http.StatusUnauthorized, "login.html", loginPage{Error: "This request carries a wrong bearer token (Authorization: Bearer), which the dashboard refuses whatever the session: is a proxy adding it?"})
		return
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil || !d.sessionOK(c.Value) {
		d.page(w, http.StatusOK, "login.html", loginPage{})
		return
	}
	d.page(w, http.StatusOK, "index.html", struct{ CSRF string }{d.csrf(c.Value)})
}

func (d *dashboard) login(w http.ResponseWriter, r *http.Request) {
	if !d.fromOrigin(r) {
		d.log.Warn("admin dashboard: login refused: from another origin", "origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		d.page(w, http.StatusForbidden, "login.html", loginPage{Error: "This login did not come from this page."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	if err := r.ParseForm(); err != nil || !d.tokenOK(r.PostForm.Get("token")) {
		d.log.Warn("admin dashboard: login refused: wrong token", "remote", r.RemoteAddr)
		d.page(w, http.StatusUnauthorized, "login.html", loginPage{Error: "Wrong token."})
		return
	}
	exp := d.cfg.Clock().Add(d.cfg.SessionLength)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: d.newSession(exp), Path: "/", Expires: exp,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: d.secure(r)})
	d.log.Info("admin dashboard: login", "remote", r.RemoteAddr)
	seeDashboard(w)
}

func (d *dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil && d.sessionOK(c.Value) {
		if !d.fromOrigin(r) || !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(d.csrf(c.Value))) {
			WriteProblem(w, http.StatusForbidden, CodeForbidden, "a logout needs the dashboard's CSRF token")
			return
		}
		end, _ := d.sessionEnd(c.Value) // sessionOK checked it
		d.revoke(c.Value, end)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: d.secure(r)})
	seeDashboard(w)
}

// seeDashboard sends the browser to the dashboard's page: "./", resolved
// against the path it asked for, so that a dashboard mounted under a
// prefix (http.StripPrefix("/admin", …) at /admin/) stays under it.
// http.Redirect would resolve it against the path without the prefix.
func seeDashboard(w http.ResponseWriter) {
	w.Header().Set("Location", "./")
	w.WriteHeader(http.StatusSeeOther)
}

// errSessionEnded ends a stream whose session has.
var errSessionEnded = errors.New("admin dashboard: the session has ended")

// streamWithin serves the events stream of a session no longer than the
// session lasts: its context ends when the session does, and no write
// goes out after it, nor after its logout (the check of each write
// follows Clock, which a timer alone would not; a logged-out stream
// ends at its next event or heartbeat).
func (d *dashboard) streamWithin(w http.ResponseWriter, r *http.Request, session string) {
	end, _ := d.sessionEnd(session) // authorized checked it
	ctx, cancel := context.WithTimeout(r.Context(), end.Sub(d.cfg.Clock()))
	defer cancel()
	live := func() bool { return d.cfg.Clock().Before(end) && !d.isRevoked(session) }
	d.api.ServeHTTP(&sessionWriter{ResponseWriter: w, live: live, cancel: cancel}, r.WithContext(ctx))
}

// sessionWriter refuses every write once its session is over (ended or
// logged out), ending the request.
type sessionWriter struct {
	http.ResponseWriter
	live   func() bool
	cancel context.CancelFunc
}

func (s *sessionWriter) Write(b []byte) (int, error) {
	if !s.live() {
		s.cancel()
		return 0, errSessionEnded
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *sessionWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
