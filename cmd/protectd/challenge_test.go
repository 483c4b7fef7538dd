package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"

	"github.com/httpprotect/protect/challenge"
)

// challengeEnv is protectd with the challenge on: two requests of a
// client allowed, the page from the third, banned past 20; difficulty 4,
// for a Go client to solve at once.
var challengeEnv = []string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=2",
	"HTTP_PROTECT_BAN_LIMIT=20", "HTTP_PROTECT_TTL=1h", "HTTP_PROTECT_CHALLENGE_SECRET=0123456789abcdef0123456789abcdef",
	"HTTP_PROTECT_CHALLENGE_DIFFICULTY=4"}

var pageNonce = regexp.MustCompile(`name="nonce" value="([^"]+)"`)

// noJSClient is a client from local that keeps no cookie and follows
// no redirect: a script that does not run the page.
func noJSClient(local string) *http.Client {
	c := clientFrom(local)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// challengePage checks that a is the challenge page, returning to ret,
// and returns its nonce.
func challengePage(t *testing.T, what string, a answer, ret string) string {
	t.Helper()
	if a.code != http.StatusForbidden || a.header.Get("Content-Security-Policy") != challenge.CSP ||
		a.header.Get("Content-Type") != "text/html; charset=utf-8" || a.header.Get("Ratelimit-Policy") == "" {
		t.Fatalf("%s = %d %v, want the challenge page: 403, text/html, its CSP, the RateLimit fields", what, a.code, a.header)
	}
	if want := `name="return" value="` + ret + `"`; !strings.Contains(a.body, want) {
		t.Fatalf("%s = a page without %s:\n%s", what, want, a.body)
	}
	m := pageNonce.FindStringSubmatch(a.body)
	if m == nil {
		t.Fatalf("%s = a page without a nonce:\n%s", what, a.body)
	}
	return m[1]
}

// postAnswer posts an answer form to the answer path of front, with the
// given header pairs.
func postAnswer(t *testing.T, c *http.Client, front, nonce, ans, ret string, header ...string) answer {
	t.Helper()
	form := url.Values{challenge.FieldNonce: {nonce}, challenge.FieldAnswer: {ans}, challenge.FieldReturn: {ret}}
	return send(t, c, "POST", front+challenge.DefaultPath, form.Encode(),
		append([]string{"Content-Type", "application/x-www-form-urlencoded"}, header...)...)
}

// passOf returns the pass cookie a sets, or nil.
func passOf(a answer) *http.Cookie {
	for _, ck := range (&http.Response{Header: a.header}).Cookies() {
		if ck.Name == challenge.CookieName {
			return ck
		}
	}
	return nil
}

// getWith is get with a cookie.
func getWith(t *testing.T, c *http.Client, u string, ck *http.Cookie) answer {
	t.Helper()
	return get(t, c, u, "Cookie", ck.Name+"="+ck.Value)
}

// penalties is protectd's protect_penalties_total.
func penalties(t *testing.T, d *daemon) int {
	t.Helper()
	res, err := http.Get("http://" + d.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "protect_penalties_total{"); ok {
			_, v, _ := strings.Cut(rest, "} ")
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("/metrics: %q", sc.Text())
			}
			return n
		}
	}
	t.Fatal("/metrics: no protect_penalties_total")
	return 0
}

// challengeScenario runs, through the proxy at front (in front of
// protectd started with challengeEnv and of app), what a client without
// JavaScript and one that solves the page in Go see: the page past the
// threshold, again and again without an answer; a right answer sets the
// pass cookie and returns, and the pass is served by the app; a replayed
// answer, a pass carried to another address and a wrong answer are each
// refused with a fresh page and counted as one failure.
func challengeScenario(t *testing.T, proxy, front string, d *daemon, app *upstream) {
	t.Helper()
	c := noJSClient("127.0.0.2")
	for i := range 2 {
		if a := get(t, c, front+"/a?x=1"); a.code != 200 {
			t.Fatalf("%s: GET /a?x=1 #%d = %d %q, want 200", proxy, i+1, a.code, a.body)
		}
	}
	a := get(t, c, front+"/a?x=1")
	challengePage(t, proxy+": GET #3", a, "/a?x=1")
	noProtectHeaders(t, proxy+": GET #3", a)
	nonce := challengePage(t, proxy+": GET #4", get(t, c, front+"/a?x=1"), "/a?x=1") // no JavaScript: refused still
	served := app.served.Load()

	a = postAnswer(t, c, front, nonce, challenge.Solve(nonce, 4), "/a?x=1")
	pass := passOf(a)
	if a.code != http.StatusSeeOther || a.header.Get("Location") != "/a?x=1" || pass == nil || !pass.HttpOnly {
		t.Fatalf("%s: POST the right answer = %d, Location %q, Set-Cookie %q; want 303 to /a?x=1 with the HttpOnly pass",
			proxy, a.code, a.header.Get("Location"), a.header.Values("Set-Cookie"))
	}
	for i := range 2 {
		if a := getWith(t, c, front+"/a?x=1", pass); a.code != 200 || a.body != "hello\n" {
			t.Fatalf("%s: GET with the pass #%d = %d %q, want the app's 200", proxy, i+1, a.code, a.body)
		}
	}
	if got := app.served.Load() - served; got != 2 {
		t.Fatalf("%s: app served %d requests with the pass, want 2", proxy, got)
	}

	p0 := penalties(t, d)
	a = postAnswer(t, c, front, nonce, challenge.Solve(nonce, 4), "/a?x=1")
	challengePage(t, proxy+": the answer replayed", a, "/a?x=1")
	if len(a.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("%s: the answer replayed = Set-Cookie %q, want none", proxy, a.header.Values("Set-Cookie"))
	}

	b := noJSClient("127.0.0.3")
	get(t, b, front+"/")
	get(t, b, front+"/")
	bNonce := challengePage(t, proxy+": another address with the pass", getWith(t, b, front+"/", pass), "/")
	wrong := "0"
	for challenge.Works(bNonce, wrong, 4) {
		wrong += "0"
	}
	challengePage(t, proxy+": a wrong answer", postAnswer(t, b, front, bNonce, wrong, "/"), "/")
	if got := penalties(t, d) - p0; got != 3 {
		t.Fatalf("%s: failures counted for a replay, a carried pass and a wrong answer = %d, want 3", proxy, got)
	}
}

// TestChallengeNginx runs challengeScenario through the shipped nginx
// config.
func TestChallengeNginx(t *testing.T) {
	bin := needNginx(t)
	app := startUpstream(t)
	d := startDaemon(t, challengeEnv...)
	front := "http://" + startNginx(t, bin, "site-fail-closed.conf", d.addr, app.addr)
	challengeScenario(t, "nginx", front, d, app)
}

// TestChallengeNginxSite401: a 401 the site makes itself (auth_basic
// under protect.conf's error_page 401) stays the site's: its status and
// WWW-Authenticate, with the challenge on or off; only protectd's is the
// page.
func TestChallengeNginxSite401(t *testing.T) {
	bin := needNginx(t)
	app := startUpstream(t)
	users := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(users, []byte("ops:{PLAIN}secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	private := `location /private { auth_basic "private"; auth_basic_user_file ` + users + `; proxy_pass http://app; }`
	for _, env := range [][]string{challengeEnv, {"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1"}} {
		d := startDaemon(t, env...)
		front := "http://" + startNginx(t, bin, "site-fail-closed.conf", d.addr, app.addr, private)
		a := get(t, noJSClient("127.0.0.2"), front+"/private")
		if a.code != http.StatusUnauthorized || a.header.Get("WWW-Authenticate") != `Basic realm="private"` {
			t.Errorf("protectd %q: GET /private without credentials = %d, WWW-Authenticate %q; want 401 and the site's Basic realm",
				env, a.code, a.header.Get("WWW-Authenticate"))
		}
	}
}

// TestChallengeCaddy runs challengeScenario through the shipped
// Caddyfile, with each Caddy.
func TestChallengeCaddy(t *testing.T) {
	for _, bin := range caddyBins(t) {
		app := startUpstream(t)
		d := startDaemon(t, challengeEnv...)
		front := "http://" + startCaddy(t, bin, d.addr, app.addr)
		challengeScenario(t, "caddy "+bin, front, d, app)
	}
}

// TestChallengeSecretMade: with the challenge on and no secret, protectd
// makes one, says so once as a warning, and its pages and passes work
// with it; with a secret, it says nothing.
func TestChallengeSecretMade(t *testing.T) {
	const msg = "HTTP_PROTECT_CHALLENGE_SECRET is not set: made a random one; passes end with this process, and other instances refuse them"
	for _, tt := range []struct {
		env      []string
		warnings int
	}{
		{[]string{"HTTP_PROTECT_CHALLENGE=true"}, 1},
		{[]string{"HTTP_PROTECT_CHALLENGE_SECRET=0123456789abcdef"}, 0},
	} {
		d := startDaemon(t, append([]string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=1",
			"HTTP_PROTECT_CHALLENGE_DIFFICULTY=4"}, tt.env...)...)
		lines := d.log.lines(t, msg)
		if len(lines) != tt.warnings || tt.warnings > 0 && lines[0]["level"] != "WARN" {
			t.Fatalf("%q: log lines %q = %v, want %d at WARN", tt.env, msg, lines, tt.warnings)
		}
		c := noJSClient("127.0.0.2")
		get(t, c, "http://"+d.addr+"/verify")
		a := get(t, c, "http://"+d.addr+"/verify", "X-Forwarded-Uri", "/p")
		n := challengePage(t, "GET /verify past the limit", a, "/p")
		a = postAnswer(t, c, "http://"+d.addr, n, challenge.Solve(n, 4), "/p")
		if a.code != http.StatusSeeOther || len(a.header.Values("Set-Cookie")) != 1 {
			t.Fatalf("%q: POST the right answer = %d %v, want 303 and the pass", tt.env, a.code, a.header)
		}
	}
}

// TestChallengeHAProxy runs challengeScenario through the shipped
// haproxy.cfg and protect.lua.
func TestChallengeHAProxy(t *testing.T) {
	bin := needBinary(t, "haproxy", ".ci/parts/31-haproxy.sh")
	app := startUpstream(t)
	d := startDaemon(t, challengeEnv...)
	front := "http://" + startHAProxy(t, bin, d.addr, app.addr, "closed")
	challengeScenario(t, "haproxy", front, d, app)
}

// TestChallengeHAProxyH2: over HTTP/2, where HAProxy's url is the
// absolute URI, the page still returns to the path asked, not to /.
func TestChallengeHAProxyH2(t *testing.T) {
	bin := needBinary(t, "haproxy", ".ci/parts/31-haproxy.sh")
	app := startUpstream(t)
	d := startDaemon(t, challengeEnv...)
	listen := startHAProxyOn(t, bin, "proto h2", d.addr, app.addr, "closed")
	c := &http.Client{Transport: &http2.Transport{AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
			return dl.DialContext(ctx, network, addr)
		}}}
	t.Cleanup(c.CloseIdleConnections) // before HAProxy's soft stop, which waits for them
	const path = "/deep/page?x=1"
	var a answer
	for range 3 { // two served, the page from the third
		a = get(t, c, "http://"+listen+path)
	}
	challengePage(t, "GET "+path+" over HTTP/2, past the limit", a, "/deep/page?x=1")
}

// TestChallengeEnvoy: through ext_authz (gRPC, with the client Envoy
// uses), a client past the threshold is denied with 403 and the page,
// its CSP among the headers, returning to the request's path; the
// answer, posted to protectd as Envoy's route for /.protect/challenge
// sends it (X-Forwarded-For from Envoy), sets the pass; a check with the
// pass in its cookie header is OK, and one from another address with
// the same pass is the page again and a counted failure.
func TestChallengeEnvoy(t *testing.T) {
	c := startGRPCDaemon(t, challengeEnv...)
	ctx := t.Context()
	check := func(source string, kv ...string) *authv3.CheckResponse {
		t.Helper()
		resp, err := c.authz.Check(ctx, checkRequest(source, 5555, kv...))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for i := range 2 {
		if resp := check("203.0.113.9"); resp.GetOkResponse() == nil {
			t.Fatalf("Check #%d = %v, want OK", i+1, resp)
		}
	}
	deniedPage := func(what string, resp *authv3.CheckResponse) string {
		t.Helper()
		den := resp.GetDeniedResponse()
		if resp.Status.Code != int32(codes.PermissionDenied) || den == nil {
			t.Fatalf("%s = %v, want PERMISSION_DENIED with the page", what, resp)
		}
		h := http.Header{}
		for _, o := range den.Headers {
			h.Add(o.Header.Key, o.Header.Value)
		}
		return challengePage(t, what, answer{int(den.Status.Code), h, den.Body}, "/api/items")
	}
	nonce := deniedPage("Check #3", check("203.0.113.9"))

	// From Envoy, the trusted proxy.
	a := postAnswer(t, noJSClient("127.0.0.1"), "http://"+c.d.addr, nonce, challenge.Solve(nonce, 4), "/api/items", "X-Forwarded-For", "203.0.113.9")
	ck := passOf(a)
	if a.code != http.StatusSeeOther || ck == nil {
		t.Fatalf("POST the answer for 203.0.113.9 = %d, Set-Cookie %q; want 303 and the pass", a.code, a.header.Values("Set-Cookie"))
	}
	pass := ck.Name + "=" + ck.Value
	if resp := check("203.0.113.9", "cookie", "a=b; "+pass); resp.GetOkResponse() == nil {
		t.Fatalf("Check with the pass = %v, want OK", resp)
	}
	p0 := penalties(t, c.d)
	check("203.0.113.10")
	check("203.0.113.10")
	deniedPage("Check from another address with the pass", check("203.0.113.10", "cookie", pass))
	if got := penalties(t, c.d) - p0; got != 1 {
		t.Fatalf("failures counted for a carried pass = %d, want 1", got)
	}
}

// TestChallengeVerifyAnswers: what protectd's handler answers about a
// challenged client, by how it is asked. Under X-Protect-Refusal-Status
// (nginx) the check is 401 with no body, the real status and code in
// headers; GET /challenge makes the page for the key a trusted proxy
// names, and refuses anyone else; without the challenge, neither path
// exists.
func TestChallengeVerifyAnswers(t *testing.T) {
	const proxy, other = "127.0.0.1:5000", "192.0.2.50:5000"
	h, _ := testVerifier(t, challengeEnv...)
	ask(h, "GET", "/verify", proxy, "X-Forwarded-For", "203.0.113.4")
	ask(h, "GET", "/verify", proxy, "X-Forwarded-For", "203.0.113.4")
	w := ask(h, "GET", "/verify", proxy, "X-Forwarded-For", "203.0.113.4", "X-Protect-Refusal-Status", "403")
	if w.Code != 401 || w.Body.Len() != 0 || w.Header().Get(hdrStatus) != "403" || w.Header().Get(hdrCode) != "challenged" ||
		w.Header().Get(hdrKey) != "203.0.113.4" || w.Header().Get("Ratelimit-Policy") == "" {
		t.Fatalf("/verify of a challenged client under X-Protect-Refusal-Status = %d %v %q, want 401, no body, status 403, code challenged, its key and the RateLimit fields", w.Code, w.Header(), w.Body)
	}
	off, _ := testVerifier(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1")
	tests := []struct {
		name   string
		h      http.Handler
		method string
		path   string
		peer   string
		header []string
		code   int
	}{
		{"the page for a trusted proxy", h, "GET", challengePagePath, proxy, []string{hdrKey, "203.0.113.4", "X-Original-URI", "/x?y=1"}, 403},
		{"the page without a key", h, "GET", challengePagePath, proxy, nil, 400},
		{"the page for an untrusted peer", h, "GET", challengePagePath, other, []string{hdrKey, "203.0.113.4"}, 400},
		{"the page asked with POST", h, "POST", challengePagePath, proxy, []string{hdrKey, "203.0.113.4"}, 405},
		{"the answer path with GET", h, "GET", challenge.DefaultPath, proxy, nil, 405},
		{"the page without the challenge", off, "GET", challengePagePath, proxy, []string{hdrKey, "203.0.113.4"}, 404},
		{"the answer path without the challenge", off, "POST", challenge.DefaultPath, proxy, nil, 404},
	}
	for _, tt := range tests {
		w := ask(tt.h, tt.method, tt.path, tt.peer, tt.header...)
		if w.Code != tt.code {
			t.Errorf("%s: %s %s = %d %q, want %d", tt.name, tt.method, tt.path, w.Code, w.Body, tt.code)
		}
		// The page alone: nginx adds the RateLimit fields of the check.
		if tt.code == 403 && (w.Header().Get("Content-Security-Policy") != challenge.CSP || !pageNonce.MatchString(w.Body.String()) ||
			!strings.Contains(w.Body.String(), `name="return" value="/x?y=1"`)) {
			t.Errorf("%s: %s %s = %v %q, want the page with its CSP, a nonce, returning to /x?y=1", tt.name, tt.method, tt.path, w.Header(), w.Body)
		}
	}
}

// TestChallengeCheck: protectd -check says the challenge's settings in
// force, and a bad challenge setting exits 2 with the variable named.
func TestChallengeCheck(t *testing.T) {
	for _, tc := range []struct {
		env    []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"HTTP_PROTECT_CHALLENGE=true"}, exitOK, "challenge: after 200, difficulty 15, pass_ttl 1h0m0s\n", ""},
		{[]string{"HTTP_PROTECT_CHALLENGE_AFTER=250", "HTTP_PROTECT_CHALLENGE_PASS_TTL=10m", "HTTP_PROTECT_CHALLENGE_SECRET=0123456789abcdef"}, exitOK,
			"challenge: after 250, difficulty 15, pass_ttl 10m0s\n", ""},
		{[]string{"HTTP_PROTECT_CHALLENGE_DIFFICULTY=33"}, exitUsage, "", `HTTP_PROTECT_CHALLENGE_DIFFICULTY="33": want 1 to 32`},
		{nil, exitOK, "", ""},
	} {
		var stdout, stderr bytes.Buffer
		env := append([]string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1"}, tc.env...)
		code := run(t.Context(), []string{"-check"}, env, &stdout, &stderr)
		got := ""
		for _, l := range strings.SplitAfter(stdout.String(), "\n") {
			if strings.HasPrefix(l, "challenge:") {
				got = l
			}
		}
		if code != tc.code || got != tc.stdout || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("protectd -check with %q = exit %d, %q, stderr %q; want exit %d, %q, stderr holding %q", tc.env, code, got, stderr.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}

var pageReturn = regexp.MustCompile(`name="return" value="([^"]*)"`)

// FuzzChallengePaths: whatever a peer sends to GET /challenge and to the
// answer path, protectd never panics; the page it makes returns to a
// relative path of the site (never "//host" nor a scheme), and an answer
// is a redirect to such a path, the page, or a refusal.
func FuzzChallengePaths(f *testing.F) {
	f.Add("127.0.0.1:5555", "203.0.113.7", "/a?b=c", "203.0.113.7", "nonce=x&answer=1&return=%2Fa")
	f.Add("127.0.0.1:5555", "", "//evil.example/", "6.6.6.6, 1.2.3.4", "return=https%3A%2F%2Fevil.example")
	f.Add("9.9.9.9:1", "k", "/\\evil", "", "nonce=&answer=99999999999999999999999&return=/%0d")
	h, _ := testVerifier(f, challengeEnv...)
	f.Fuzz(func(t *testing.T, peer, key, uri, xff, body string) {
		if strings.ContainsAny(key+uri+xff, "\r\n\x00") {
			return // no HTTP server would hand such headers to a handler
		}
		w := ask(h, "GET", challengePagePath, peer, hdrKey, key, "X-Original-URI", uri)
		if w.Code == 403 {
			m := pageReturn.FindStringSubmatch(w.Body.String())
			if m == nil || !strings.HasPrefix(m[1], "/") || strings.HasPrefix(m[1], "//") {
				t.Fatalf("GET %s (key %q, uri %q) = a page returning to %q, want a relative path", challengePagePath, key, uri, m)
			}
		} else if w.Code != 400 {
			t.Fatalf("GET %s (key %q, uri %q) from %s = %d, want the page or 400", challengePagePath, key, uri, peer, w.Code)
		}
		r := httptest.NewRequest("POST", challenge.DefaultPath, strings.NewReader(body))
		r.RemoteAddr = peer
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("X-Forwarded-For", xff)
		aw := httptest.NewRecorder()
		h.ServeHTTP(aw, r)
		switch loc := aw.Header().Get("Location"); aw.Code {
		case http.StatusSeeOther:
			if !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") {
				t.Fatalf("POST %s %q = 303 to %q, want a relative path", challenge.DefaultPath, body, loc)
			}
		case 400, 403, 429, 503:
		default:
			t.Fatalf("POST %s %q from %s = %d, want 303, the page or a refusal", challenge.DefaultPath, body, peer, aw.Code)
		}
	})
}

// postAnswerTo posts an answer form straight to protectd's handler h from
// the trusted proxy, for client, with the given header pairs.
func postAnswerTo(h http.Handler, client, nonce, ans string, header ...string) *httptest.ResponseRecorder {
	form := url.Values{challenge.FieldNonce: {nonce}, challenge.FieldAnswer: {ans}, challenge.FieldReturn: {"/a"}}
	r := httptest.NewRequest("POST", challenge.DefaultPath, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = "127.0.0.1:2"
	r.Header.Set("X-Forwarded-For", client)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestChallengeAnswerNamesNoConsumer: the answer path charges no
// consumer a request names. A client whose proxy passes its own
// X-Protect-Consumer on the answer route (Envoy's, before it stripped
// them) posts wrong answers naming a paying customer: they are failures
// of the client's address, and the customer's quota is whole.
func TestChallengeAnswerNamesNoConsumer(t *testing.T) {
	h, _ := testVerifier(t, append(challengeEnv, grpcPlans)...)
	for range 3 {
		postAnswerTo(h, "198.51.100.7", "x", "1", hdrConsumer, "alice", hdrPlan, "quota")
	}
	for i := range 3 { // the quota: 3 a month
		if w := ask(h, "GET", "/verify", "127.0.0.1:1", "X-Forwarded-For", "203.0.113.9",
			hdrConsumer, "alice", hdrPlan, "quota"); w.Code != http.StatusOK {
			t.Fatalf("alice's request %d after another client's forged answers = %d %s, want 200", i+1, w.Code, w.Header().Get(hdrCode))
		}
	}
}

// TestChallengeListedConsumer: a consumer from an address on a list
// marked to challenge gets a page bound to its address's key, which the
// answer path (that knows no consumer) checks: a right answer gets a
// pass, with or without the consumer's headers, and the pass lets the
// consumer through.
func TestChallengeListedConsumer(t *testing.T) {
	list := filepath.Join(t.TempDir(), "suspect.txt")
	if err := os.WriteFile(list, []byte("203.0.113.0/24\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, _ := testVerifier(t, append(challengeEnv, grpcPlans, "HTTP_PROTECT_BLOCKLISTS=suspect=challenge:"+list)...)
	consumer := []string{"X-Forwarded-For", "203.0.113.9", hdrConsumer, "alice", hdrPlan, "pro", "X-Original-URI", "/a"}
	w := ask(h, "GET", "/verify", "127.0.0.1:1", consumer...)
	if w.Code != http.StatusForbidden || w.Header().Get(hdrKey) != "203.0.113.9" {
		t.Fatalf("/verify of alice from a listed address = %d, key %q; want 403 and the page for 203.0.113.9", w.Code, w.Header().Get(hdrKey))
	}
	m := pageNonce.FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("/verify of alice from a listed address: no page:\n%s", w.Body)
	}
	for _, header := range [][]string{nil, {hdrConsumer, "alice", hdrPlan, "pro"}} {
		a := postAnswerTo(h, "203.0.113.9", m[1], challenge.Solve(m[1], 4), header...)
		pass := a.Result().Cookies()
		if a.Code != http.StatusSeeOther || len(pass) != 1 || pass[0].Name != challenge.CookieName {
			t.Fatalf("a right answer (headers %q) = %d, cookies %v; want 303 and a pass", header, a.Code, pass)
		}
		m[1] = pageNonce.FindStringSubmatch(ask(h, "GET", "/verify", "127.0.0.1:1", consumer...).Body.String())[1]
		if w := ask(h, "GET", "/verify", "127.0.0.1:1", append(consumer, "Cookie", pass[0].Name+"="+pass[0].Value)...); w.Code != http.StatusOK {
			t.Fatalf("/verify of alice with the pass = %d %s, want 200", w.Code, w.Header().Get(hdrCode))
		}
	}
}
