package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/httpprotect/protect/admin"
)

// The end-to-end tests run the nginx configs of examples/proxies/nginx,
// as shipped, with only their addresses changed: client → nginx →
// protectd (in-process, through run) → an upstream httptest server.

const nginxExamples = "../../examples/proxies/nginx"

// needNginx returns the nginx binary, or skips (fails under CI, which
// installs it).
func needNginx(t *testing.T) string {
	t.Helper()
	return needBinary(t, "nginx", ".ci/parts/20-nginx.sh")
}

// freePort returns a loopback address nothing listens on (yet).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startNginx runs nginx with the site config site (a file of
// examples/proxies/nginx), serverLines added to its server block, in
// front of protectd and app, as the shipped
// nginx.conf runs it (its temporary files under the prefix, a test
// directory), and returns the address it listens on. It is stopped by its PID in t.Cleanup.
func startNginx(t *testing.T, bin, site, protectd, app string, serverLines ...string) string {
	t.Helper()
	dir := t.TempDir()
	listen := freePort(t)
	conf, err := os.ReadFile(filepath.Join(nginxExamples, site))
	if err != nil {
		t.Fatal(err)
	}
	replaced := strings.NewReplacer(
		"server 127.0.0.1:8089;", "server "+protectd+";",
		"server 127.0.0.1:3000;", "server "+app+";",
		// serverLines go in the server block, after its listen.
		"listen 127.0.0.1:8080;", "listen "+listen+";\n"+strings.Join(serverLines, "\n"),
	).Replace(string(conf))
	if replaced == string(conf) || strings.Count(replaced, listen) != 1 {
		t.Fatalf("%s with its addresses replaced = changed %v, listening %d times on %s; want changed, once: the addresses are not where the test expects them", site, replaced != string(conf), strings.Count(replaced, listen), listen)
	}
	include, err := os.ReadFile(filepath.Join(nginxExamples, "protect.conf"))
	if err != nil {
		t.Fatal(err)
	}
	// The shipped nginx.conf, including the site under test.
	mainConf, err := os.ReadFile(filepath.Join(nginxExamples, "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	main := strings.Replace(string(mainConf), "include site-fail-closed.conf;", "include site.conf;", 1)
	if main == string(mainConf) {
		t.Fatalf("nginx.conf = no \"include site-fail-closed.conf;\" where the test expects it")
	}
	for name, data := range map[string]string{"nginx.conf": main, "site.conf": replaced, "protect.conf": string(include)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// nginx logs to stderr, which startProxy shows when nginx fails.
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", "stderr",
		"-g", fmt.Sprintf("daemon off; pid %s; error_log stderr warn;", filepath.Join(dir, "nginx.pid")))
	startProxy(t, "nginx with "+site, listen, syscall.SIGQUIT, cmd)
	return listen
}

// clientFrom is an HTTP client whose connections come from local, a
// loopback address other than nginx's own: protectd trusts 127.0.0.1
// (nginx), so the client must not be it.
func clientFrom(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	return &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4},
		Timeout:   10 * time.Second,
	}
}

// upstream is the app: it counts what reaches it and what nginx told it.
type upstream struct {
	addr   string
	served atomic.Int64
	// The last X-Protect-Key, RateLimit and RateLimit-Policy it got.
	keys, rateLimit, rateLimitPolicy atomic.Value
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.served.Add(1)
		u.keys.Store(r.Header.Get(hdrKey))
		u.rateLimit.Store(r.Header.Get("RateLimit"))
		u.rateLimitPolicy.Store(r.Header.Get("RateLimit-Policy"))
		if r.URL.Path == "/forbidden" { // the app's own refusal
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "the app says no\n")
			return
		}
		io.WriteString(w, "hello\n")
	}))
	t.Cleanup(srv.Close)
	u.addr = strings.TrimPrefix(srv.URL, "http://")
	return u
}

// answer is one response as the client saw it.
type answer struct {
	code   int
	header http.Header
	body   string
}

func get(t *testing.T, c *http.Client, url string, header ...string) answer {
	t.Helper()
	return send(t, c, "GET", url, "", header...)
}

// send sends a request of method with body and the header pairs.
func send(t *testing.T, c *http.Client, method, url, body string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{res.StatusCode, res.Header, string(b)}
}

// problemCode is the "code" of a problem+json body, and checks the
// body's status against the response's.
func problemCode(t *testing.T, a answer) string {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("response %d = Content-Type %q, body %q; want application/problem+json", a.code, ct, a.body)
	}
	var p struct {
		Status int    `json:"status"`
		Code   string `json:"code"`
	}
	if err := json.Unmarshal([]byte(a.body), &p); err != nil || p.Status != a.code {
		t.Fatalf("response %d = body %q (%v), want problem+json of status %d", a.code, a.body, err, a.code)
	}
	return p.Code
}

// TestNginx: 300 requests of one client through nginx give exactly 100
// served, 150 refused with 429 and 50 banned with 403, with Retry-After
// and the RateLimit fields, however the client forges X-Forwarded-For or
// names a consumer; with protectd stopped, the fail-closed site answers
// 503 with Retry-After and the fail-open site serves.
func TestNginx(t *testing.T) {
	bin := needNginx(t)
	app := startUpstream(t)
	d := startDaemon(t, seedEnv...)
	closed := "http://" + startNginx(t, bin, "site-fail-closed.conf", d.addr, app.addr)
	open := "http://" + startNginx(t, bin, "site-fail-open.conf", d.addr, app.addr)
	seedScenario(t, "nginx", closed, "127.0.0.2", d, app)
	c := clientFrom("127.0.0.2")

	// The fail-open site asks the same protectd: another client is served.
	c3 := clientFrom("127.0.0.3")
	if a := get(t, c3, open+"/"); a.code != 200 || a.header.Get("RateLimit") != `"protect";r=99;t=3600` {
		t.Fatalf("GET / on the fail-open site with protectd up = %d %v, want 200, RateLimit r=99;t=3600", a.code, a.header)
	}

	// The app's own 403 reaches the client as the app wrote it.
	if a := get(t, c3, closed+"/forbidden"); a.code != 403 || a.body != "the app says no\n" {
		t.Fatalf("GET /forbidden through nginx = %d %q, want the app's 403 \"the app says no\"", a.code, a.body)
	}

	// protectd stops.
	if code := d.stop(); code != exitOK {
		t.Fatalf("d.stop() = exit %d, want 0", code)
	}
	wantUnavailable(t, "nginx (fail closed)", closed, c3, app)
	// Even the banned client is served by the fail-open site: that is
	// what failing open means.
	for _, cl := range []*http.Client{c3, c} {
		wantServedUnchecked(t, "nginx (fail open)", open, cl, app)
	}
}

// rawGet sends request, written as it is, from local to nginx at addr:
// net/http refuses to send the control characters these tests forge.
func rawGet(t *testing.T, local, addr, request string) answer {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{res.StatusCode, res.Header, string(b)}
}

// TestNginxHostileForwardedFor: a control character in an X-Forwarded-For
// that reached protectd would make Go's server refuse the check with its
// own 400, which auth_request turns into a 500: the fail-open site would
// serve a banned client, and the fail-closed one tell it protectd was
// down. Whatever the client writes there, it gets its own decision.
func TestNginxHostileForwardedFor(t *testing.T) {
	bin := needNginx(t)
	app := startUpstream(t)
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=1",
		"HTTP_PROTECT_BAN_LIMIT=2", "HTTP_PROTECT_TTL=1h")
	sites := map[string]string{
		"fail-closed": startNginx(t, bin, "site-fail-closed.conf", d.addr, app.addr),
		"fail-open":   startNginx(t, bin, "site-fail-open.conf", d.addr, app.addr),
	}
	// 127.0.0.4 is banned on its third request.
	c := clientFrom("127.0.0.4")
	for i, want := range []int{200, 429, 403} {
		if a := get(t, c, "http://"+sites["fail-closed"]+"/"); a.code != want {
			t.Fatalf("GET / #%d from 127.0.0.4 on the fail-closed site = %d, want %d", i+1, a.code, want)
		}
	}
	served := app.served.Load()
	for _, xff := range []string{"\x01", "1.2.3.4\x7f", "6.6.6.6,\t1.2.3.4", "\x1b[31m", "1.2.3.4, \x0b"} {
		for name, addr := range sites {
			// The second line of X-Forwarded-For is clean: nginx joins the lines.
			a := rawGet(t, "127.0.0.4", addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"+
				"X-Forwarded-For: "+xff+"\r\nX-Forwarded-For: 5.5.5.5\r\n\r\n")
			if a.code != 403 || problemCode(t, a) != "banned" || a.header.Get("Retry-After") == "" {
				t.Errorf("GET / on the %s site with X-Forwarded-For %q = %d %v %q; want 403 banned with Retry-After", name, xff, a.code, a.header, a.body)
			}
		}
	}
	if n := app.served.Load(); n != served {
		t.Errorf("requests the app served after the hostile ones = %d more, want 0: all came from a banned client", n-served)
	}
}

// TestNginxLocalClient: behind nginx on one machine, with
// TRUSTED_PROXIES=127.0.0.1 as the README shows, a curl from 127.0.0.1
// itself is counted as 127.0.0.1 (its chain is all trusted: the leftmost
// entry is the client, as nginx's realip module decides), served to the
// limit and then refused; a client on 127.0.0.2 forging X-Forwarded-For:
// 127.0.0.1 is still counted as 127.0.0.2.
func TestNginxLocalClient(t *testing.T) {
	bin := needNginx(t)
	app := startUpstream(t)
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=3",
		"HTTP_PROTECT_BAN_LIMIT=100", "HTTP_PROTECT_TTL=1h")
	site := "http://" + startNginx(t, bin, "site-fail-closed.conf", d.addr, app.addr)
	tests := []struct {
		from, forged, key string
	}{
		{"127.0.0.1", "", "127.0.0.1"},
		{"127.0.0.2", "127.0.0.1", "127.0.0.2"},
	}
	for _, tt := range tests {
		c := clientFrom(tt.from)
		for i, want := range []int{200, 200, 200, 429} {
			var header []string
			if tt.forged != "" {
				header = []string{"X-Forwarded-For", tt.forged}
			}
			a := get(t, c, site+"/", header...)
			if a.code != want {
				t.Fatalf("GET / #%d from %s (X-Forwarded-For %q) = %d %q, want %d", i+1, tt.from, tt.forged, a.code, a.body, want)
			}
			if want == 429 && problemCode(t, a) != "rate_limited" {
				t.Fatalf("GET / #%d from %s = %d %q, want 429 rate_limited", i+1, tt.from, a.code, a.body)
			}
		}
		if k := app.keys.Load(); k != tt.key {
			t.Fatalf("%s at the app after requests from %s = %q, want %q", hdrKey, tt.from, k, tt.key)
		}
	}
}

// TestNginxForgedForwardedFor: a client whose own address protectd
// trusts (one on nginx's host, or inside a wide TRUSTED_PROXIES) sends
// X-Forwarded-For: 9.9.9.9 through the shipped nginx config. It is
// counted, limited and banned as its own address; 9.9.9.9 is never
// counted, nor banned. A config that passes the client's chain on
// ($proxy_add_x_forwarded_for) bans 9.9.9.9 instead.
func TestNginxForgedForwardedFor(t *testing.T) {
	bin := needNginx(t)
	tests := []struct {
		trusted, from string
	}{
		{"127.0.0.1", "127.0.0.1"},   // a curl on nginx's own host
		{"127.0.0.0/8", "127.0.0.2"}, // a client inside a wide TRUSTED_PROXIES
	}
	for _, tt := range tests {
		t.Run(tt.from, func(t *testing.T) {
			app := startUpstream(t)
			d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES="+tt.trusted, "HTTP_PROTECT_MAX_REQUESTS=2",
				"HTTP_PROTECT_BAN_LIMIT=3", "HTTP_PROTECT_TTL=1h", envAdminListen+"=127.0.0.1:0", envAdminToken+"="+adminToken)
			base := "http://" + adminAddr(t, d)
			site := "http://" + startNginx(t, bin, "site-fail-closed.conf", d.addr, app.addr)
			c := clientFrom(tt.from)
			for i, want := range []int{200, 200, 429, 403, 403} {
				if a := get(t, c, site+"/", "X-Forwarded-For", "9.9.9.9"); a.code != want {
					t.Fatalf("GET / #%d from %s with X-Forwarded-For 9.9.9.9 = %d %q, want %d", i+1, tt.from, a.code, a.body, want)
				}
			}
			if k := app.keys.Load(); k != tt.from {
				t.Errorf("%s at the app = %q, want %q", hdrKey, k, tt.from)
			}
			for _, l := range d.log.lines(t, "refused") {
				if l["key"] != tt.from {
					t.Errorf("refused line key = %v, want %s: %v", l["key"], tt.from, l)
				}
			}
			auth := "Bearer " + adminToken
			code, body := adminDo(t, http.DefaultClient, "GET", base+"/v1/bans", auth)
			var bans []admin.BanRecord
			if code != 200 || json.Unmarshal(body, &bans) != nil || len(bans) != 1 || bans[0].Key != tt.from {
				t.Errorf("GET /v1/bans = %d %s, want 200 and one ban, of %s", code, body, tt.from)
			}
			code, body = adminDo(t, http.DefaultClient, "GET", base+"/v1/inspect?target=9.9.9.9", auth)
			var in admin.Inspection
			if code != 200 || json.Unmarshal(body, &in) != nil || in.Count != 0 || in.Ban != nil {
				t.Errorf("GET /v1/inspect?target=9.9.9.9 = %d %s, want 200, count 0 and no ban", code, body)
			}
		})
	}
}

// realIPLines are the realip lines of examples/proxies/README.md, for
// nginx behind another proxy, with that proxy's range replaced by front.
func realIPLines(t *testing.T, front string) []string {
	t.Helper()
	b, err := os.ReadFile("../../examples/proxies/README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(b), "```nginx\n")
	block, _, _ = strings.Cut(block, "```")
	var lines []string
	for line := range strings.SplitSeq(strings.TrimSpace(block), "\n") {
		line, _, _ = strings.Cut(line, "#")
		lines = append(lines, strings.Replace(line, "10.0.16.0/20", front, 1))
	}
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "set_real_ip_from "+front) {
		t.Fatalf("examples/proxies/README.md realip block = %q, want set_real_ip_from 10.0.16.0/20 and two more lines", lines)
	}
	return lines
}

// TestNginxBehindProxy: nginx behind another proxy (127.0.0.5 here), with
// the realip lines examples/proxies/README.md gives, counts the client
// that proxy saw, never the one a client forged left of it; a client
// that connects to nginx directly is counted as itself, whatever it
// writes.
func TestNginxBehindProxy(t *testing.T) {
	bin := needNginx(t)
	app := startUpstream(t)
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=100",
		"HTTP_PROTECT_BAN_LIMIT=200", "HTTP_PROTECT_TTL=1h")
	site := "http://" + startNginx(t, bin, "site-fail-closed.conf", d.addr, app.addr, realIPLines(t, "127.0.0.5")...)
	tests := []struct {
		from, xff, key string
	}{
		{"127.0.0.5", "9.9.9.9, 203.0.113.7", "203.0.113.7"}, // the front proxy appended 203.0.113.7
		{"127.0.0.2", "9.9.9.9", "127.0.0.2"},                // a client reaching nginx directly
	}
	for _, tt := range tests {
		if a := get(t, clientFrom(tt.from), site+"/", "X-Forwarded-For", tt.xff); a.code != 200 {
			t.Fatalf("GET / from %s with X-Forwarded-For %q = %d %q, want 200", tt.from, tt.xff, a.code, a.body)
		}
		if k := app.keys.Load(); k != tt.key {
			t.Errorf("%s at the app after GET / from %s with X-Forwarded-For %q = %q, want %q", hdrKey, tt.from, tt.xff, k, tt.key)
		}
	}
}
