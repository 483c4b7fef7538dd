package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/testclock"
	"github.com/httpprotect/protect/memstore"
	"github.com/httpprotect/protect/store"
)

const (
	keyA = "bouncer-a-0123456789abcdef"
	keyB = "bouncer-b-0123456789abcdef"
)

// lapiRig is the Local API over a protector on a fake clock.
type lapiRig struct {
	p     *protect.Protector
	clock *testclock.Clock
	h     *lapi
}

func newLAPIRig(t testing.TB) *lapiRig {
	t.Helper()
	clock := testclock.New()
	p, err := protect.New(protect.Config{Clock: clock.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return &lapiRig{p: p, clock: clock, h: lapiOf(p, nil, []string{keyA, keyB}, clock.Now, slog.New(slog.NewTextHandler(io.Discard, nil)))}
}

// lapiOf is the Local API of p's bans, and of lists when not nil, each
// bouncer's place kept in p's store.
func lapiOf(p *protect.Protector, lists func() []protect.Ban, keys []string, clock func() time.Time, log *slog.Logger) *lapi {
	return newLAPI(admin.New(p), p.Space().(store.Bookmarks), lists, keys, clock, log)
}

func (r *lapiRig) ban(t testing.TB, target string, opt protect.BanOptions) protect.Ban {
	t.Helper()
	b, err := r.p.Ban(context.Background(), target, opt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// get asks path with key and checks the status and the exact body.
func (r *lapiRig) get(t *testing.T, path, key string, status int, body string) {
	t.Helper()
	r.getOn(t, keepAlive(key), path, key, status, body)
}

// keepAlive is the connection a bouncer of key keeps open, as bouncers
// do between pulls.
func keepAlive(key string) uint64 {
	if key == keyB {
		return 2
	}
	return 1
}

// getOn is get on connection conn, a number as connContext gives.
func (r *lapiRig) getOn(t *testing.T, conn uint64, path, key string, status int, body string) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req = req.WithContext(context.WithValue(req.Context(), lapiConnKey{}, conn))
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	w := httptest.NewRecorder()
	r.h.ServeHTTP(w, req)
	if w.Code != status || w.Body.String() != body {
		t.Errorf("GET %s (key %.9s) = %d %s\nwant %d %s", path, key, w.Code, w.Body, status, body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("GET %s: Content-Type %q, want application/json; charset=utf-8", path, ct)
	}
}

// dec is the JSON of ban b's decision with duration and until as given.
func dec(b protect.Ban, scope, value, scenario, duration, until string) string {
	return fmt.Sprintf(`{"duration":%q,"id":%d,"origin":"protect","scenario":%q,"scope":%q,"type":"ban","until":%q,"value":%q}`,
		duration, decisionID(b), scenario, scope, until, value)
}

// prior is the deletion that comes before an operator's ban b of value:
// of whatever the bouncer held there (priorID).
func prior(b protect.Ban, scope, value, duration, until string) string {
	return fmt.Sprintf(`{"duration":%q,"id":%d,"origin":"protect","scenario":%q,"scope":%q,"type":"ban","until":%q,"value":%q}`,
		duration, priorID(b.Key), b.Reason, scope, until, value)
}

func list(ds ...string) string {
	if len(ds) == 0 {
		return "null"
	}
	return "[" + strings.Join(ds, ",") + "]"
}

func stream(deleted, added []string) string {
	return `{"deleted":` + list(deleted...) + `,"new":` + list(added...) + `}`
}

func TestLAPIStream(t *testing.T) {
	r := newLAPIRig(t)
	// 2026-11-29T12:00:00Z is the clock's start.
	host := r.ban(t, "203.0.113.7", protect.BanOptions{For: time.Hour, Reason: "credential stuffing"})
	rng := r.ban(t, "198.51.100.0/24", protect.BanOptions{Permanent: true})
	six := r.ban(t, "2001:db8:1:2::99", protect.BanOptions{For: 30 * time.Minute, Reason: "scanner"})
	r.ban(t, "consumer:cus_alpha", protect.BanOptions{For: time.Hour}) // no address: no decision
	dHost := dec(host, "Ip", "203.0.113.7", "credential stuffing", "1h0m0s", "2026-11-29T13:00:00Z")
	dRange := dec(rng, "Range", "198.51.100.0/24", "manual", "87600h0m0s", "2036-11-26T12:00:00Z")
	dSix := dec(six, "Range", "2001:db8:1:2::/64", "scanner", "30m0s", "2026-11-29T12:30:00Z")

	const path = "/v1/decisions/stream"
	r.get(t, path+"?startup=true", keyA, 200, stream(nil, []string{dRange, dHost, dSix}))
	r.get(t, path, keyA, 200, stream(nil, nil))

	r.clock.Advance(time.Minute)
	late := r.ban(t, "192.0.2.1", protect.BanOptions{For: 10 * time.Minute})
	if _, err := r.p.Lift(context.Background(), "198.51.100.0/24", "test"); err != nil {
		t.Fatal(err)
	}
	dLate := dec(late, "Ip", "192.0.2.1", "manual", "10m0s", "2026-11-29T12:11:00Z")
	dRangeLifted := dec(rng, "Range", "198.51.100.0/24", "manual", "87600h0m0s", "2036-11-26T12:01:00Z")
	r.get(t, path, keyA, 200, stream([]string{prior(late, "Ip", "192.0.2.1", "10m0s", "2026-11-29T12:11:00Z"), dRangeLifted}, []string{dLate}))

	// Thirty minutes on, two bans are over: each is a deletion once the
	// store journals its end, when it next looks at it.
	r.clock.Advance(30 * time.Minute)
	r.get(t, path, keyA, 200, stream(nil, nil))
	if d, err := r.p.VerifyAddr(context.Background(), netip.MustParseAddr("192.0.2.1")); err != nil || d.Status != protect.Allowed {
		t.Fatalf("VerifyAddr(192.0.2.1) after its ban = %v, %v; want Allowed", d.Status, err)
	}
	r.get(t, path, keyA, 200, stream([]string{dec(late, "Ip", "192.0.2.1", "manual", "-20m0s", "2026-11-29T12:11:00Z")}, nil))

	// Another key is another bouncer, with a history of its own.
	r.get(t, path, keyB, 200, stream(nil, []string{dec(host, "Ip", "203.0.113.7", "credential stuffing", "29m0s", "2026-11-29T13:00:00Z")}))
	r.get(t, path, keyB, 200, stream(nil, nil))
	// startup=true starts over.
	r.get(t, path+"?startup=true", keyA, 200, stream(nil, []string{dec(host, "Ip", "203.0.113.7", "credential stuffing", "29m0s", "2026-11-29T13:00:00Z")}))

	// A filter of scopes, as bouncers send it.
	r.get(t, path+"?startup=true&scopes=range", keyB, 200, stream(nil, nil))
}

func TestLAPIDecisions(t *testing.T) {
	r := newLAPIRig(t)
	host := r.ban(t, "203.0.113.7", protect.BanOptions{For: time.Hour})
	rng := r.ban(t, "198.51.100.0/24", protect.BanOptions{For: 2 * time.Hour, Reason: "escalated"})
	dHost := dec(host, "Ip", "203.0.113.7", "manual", "1h0m0s", "2026-11-29T13:00:00Z")
	dRange := dec(rng, "Range", "198.51.100.0/24", "escalated", "2h0m0s", "2026-11-29T14:00:00Z")
	tests := []struct {
		path, body string
		status     int
	}{
		{"/v1/decisions?ip=203.0.113.7", list(dHost), 200},
		{"/v1/decisions?ip=198.51.100.200", list(dRange), 200},
		{"/v1/decisions?ip=::ffff:198.51.100.200", list(dRange), 200},
		{"/v1/decisions?ip=192.0.2.1", "null", 200},
		{"/v1/decisions", list(dRange, dHost), 200},
		{"/v1/decisions?ip=nope", `{"message":"ip: not an address"}`, 400},
		// The other filters of the bouncer API, as live-mode bouncers send them.
		{"/v1/decisions?scope=ip&value=203.0.113.7", list(dHost), 200},
		{"/v1/decisions?scope=Range&value=198.51.100.0/24", list(dRange), 200},
		{"/v1/decisions?scope=ip&value=203.0.113.8", "null", 200},
		{"/v1/decisions?value=198.51.100.0/24", list(dRange), 200},
		{"/v1/decisions?scope=username", `{"message":"scope: unknown \"username\" (want ip, range, country, as)"}`, 400},
		{"/v1/decisions?type=ban", list(dRange, dHost), 200},
		{"/v1/decisions?type=captcha", "null", 200},
		{"/v1/decisions?type=ban&ip=203.0.113.7", list(dHost), 200},
		{"/v1/decisions?range=198.51.100.128/25", list(dRange), 200},
		{"/v1/decisions?range=198.51.100.0/24", list(dRange), 200},
		{"/v1/decisions?range=198.51.0.0/16", "null", 200},
		{"/v1/decisions?range=198.51.0.0/16&contains=false", list(dRange), 200},
		{"/v1/decisions?range=203.0.113.0/24&contains=false", list(dHost), 200},
		{"/v1/decisions?range=203.0.113.7/32", list(dHost), 200},
		{"/v1/decisions?range=2001:db8::/32&contains=false", "null", 200},
		{"/v1/decisions?range=::ffff:198.51.100.0/120", list(dRange), 200},
		{"/v1/decisions?range=nope", `{"message":"range: not a CIDR"}`, 400},
		{"/v1/decisions?range=198.51.100.7/24", `{"message":"range: not a CIDR"}`, 400},
		{"/v1/decisions?range=198.51.0.0/16&contains=maybe", `{"message":"contains: want true or false"}`, 400},
		{"/v1/alerts", `{"message":"page not found"}`, 404},
	}
	for _, tt := range tests {
		r.get(t, tt.path, keyA, tt.status, tt.body)
	}
}

func TestLAPIRefusesWrongKeys(t *testing.T) {
	r := newLAPIRig(t)
	for _, key := range []string{"", "wrong", keyA + "x", keyA[:len(keyA)-1]} {
		for _, path := range []string{"/v1/decisions/stream?startup=true", "/v1/decisions?ip=192.0.2.1"} {
			r.get(t, path, key, 403, `{"message":"access forbidden"}`)
		}
	}
}

func TestLAPISettings(t *testing.T) {
	base := []string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1"}
	tests := []struct {
		env  []string
		want string // "" for no error
	}{
		{[]string{envLAPIListen + "=127.0.0.1:0", envLAPIKeys + "=" + keyA + "," + keyB}, ""},
		{[]string{envLAPIListen + "=127.0.0.1:0"}, "HTTP_PROTECT_LAPI_KEYS is needed with HTTP_PROTECT_LAPI_LISTEN: the bouncers' API keys, a comma list or a file"},
		{[]string{envLAPIKeys + "=" + keyA}, "HTTP_PROTECT_LAPI_KEYS is set without HTTP_PROTECT_LAPI_LISTEN: set both, or neither"},
		{[]string{envLAPIListen + "=127.0.0.1:0", envLAPIKeys + "=" + keyA + ",short"}, "HTTP_PROTECT_LAPI_KEYS: key 2 of 2: want at least 16 characters and no spaces (cscli bouncers add makes such keys)"},
		{[]string{envLAPIListen + "=127.0.0.1:0", envLAPIKeys + "=/nonexistent/keys"}, `HTTP_PROTECT_LAPI_KEYS="/nonexistent/keys": open /nonexistent/keys: no such file or directory`},
		{[]string{envLAPIListen + "=localhost", envLAPIKeys + "=" + keyA}, `HTTP_PROTECT_LAPI_LISTEN="localhost": want host:port, such as 127.0.0.1:8089, or unix:PATH`},
		{[]string{envNFT + "=inet protect ban4"}, `HTTP_PROTECT_NFT="inet protect ban4": nftsink: bad set specification: want FAMILY TABLE SET4 SET6, such as "inet protect ban4 ban6", or true`},
		{[]string{envNFT + "=true", envNFTInterval + "=0s"}, `HTTP_PROTECT_NFT_INTERVAL="0s": want a duration from 1ms to 1m, such as 500ms or 0.5`},
		{[]string{envNFT + "=true", envNFTInterval + "=90"}, `HTTP_PROTECT_NFT_INTERVAL="90": want a duration from 1ms to 1m, such as 500ms or 0.5`},
		{[]string{envNFT + "=true", envNFTInterval + "=0.25"}, ""},
		{[]string{envNFT + "=ip fw b4 -", envNFTInterval + "=250ms"}, ""},
	}
	for _, tt := range tests {
		_, err := loadSettings(append(base, tt.env...))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("loadSettings(%q) = %q, want %q", tt.env, got, tt.want)
		}
	}
}

// TestLAPIServedByProtectd starts protectd with the Local API on and
// asks it over TCP, as a bouncer does.
func TestLAPIServedByProtectd(t *testing.T) {
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1",
		envLAPIListen+"=127.0.0.1:0", envLAPIKeys+"="+keyA)
	lines := d.log.lines(t, "crowdsec local api")
	if len(lines) != 1 {
		t.Fatalf("protectd logged %d %q lines, want 1; log:\n%s", len(lines), "crowdsec local api", d.log)
	}
	url := "http://" + lines[0]["addr"].(string) + "/v1/decisions/stream?startup=true"
	for _, tt := range []struct {
		key    string
		status int
		body   string
	}{
		{keyA, 200, `{"deleted":null,"new":null}`},
		{keyB, 403, `{"message":"access forbidden"}`},
	} {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("X-Api-Key", tt.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || string(body) != tt.body {
			t.Errorf("GET %s (key %.9s) = %d %s, want %d %s", url, tt.key, resp.StatusCode, body, tt.status, tt.body)
		}
	}
	if code := d.stop(); code != 0 {
		t.Errorf("protectd exit = %d, want 0; log:\n%s", code, d.log)
	}
}

// FuzzLAPIQuery sends any query to both endpoints: the answer is JSON,
// 200 or 400, never a panic.
func FuzzLAPIQuery(f *testing.F) {
	f.Add("startup=true&scopes=ip,range")
	f.Add("ip=203.0.113.7")
	f.Add("ip=%zz&scenarios_containing=,,")
	f.Add("scopes=Ip,RANGE&origins=crowdsec,CAPI&type=ban")
	f.Add("scope=bogus&range=198.51.100.0/24&contains=false")
	r := newLAPIRig(f)
	r.ban(f, "203.0.113.7", protect.BanOptions{For: time.Hour})
	f.Fuzz(func(t *testing.T, q string) {
		for _, path := range []string{"/v1/decisions/stream?", "/v1/decisions?"} {
			req := httptest.NewRequest("GET", "/", nil)
			req.URL.Path, req.URL.RawQuery = strings.TrimSuffix(path, "?"), q
			req.Header.Set("X-Api-Key", keyA)
			w := httptest.NewRecorder()
			r.h.ServeHTTP(w, req)
			if (w.Code != 200 && w.Code != 400) || !json.Valid(w.Body.Bytes()) {
				t.Fatalf("GET %s%s = %d %s, want 200 or 400 and JSON", path, q, w.Code, w.Body)
			}
		}
	})
}

// TestLAPIServedOnUnixSocket: HTTP_PROTECT_LAPI_LISTEN=unix:PATH, which
// its check accepts, serves the Local API on that socket.
func TestLAPIServedOnUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lapi.sock")
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1",
		envLAPIListen+"=unix:"+path, envLAPIKeys+"="+keyA)
	req, _ := http.NewRequest("GET", "http://protectd/v1/decisions/stream?startup=true", nil)
	req.Header.Set("X-Api-Key", keyA)
	resp, err := unixClient(path).Do(req)
	if err != nil {
		t.Fatalf("GET over %s: %v; log:\n%s", path, err, d.log)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"deleted":null,"new":null}` {
		t.Errorf("GET over %s = %d %s, want 200 and an empty stream", path, resp.StatusCode, body)
	}
	if code := d.stop(); code != 0 {
		t.Errorf("protectd exit = %d, want 0; log:\n%s", code, d.log)
	}
}

// serveLAPI serves r's Local API over TCP as protectd does, numbering
// connections; closed receives each connection the server has closed.
func (r *lapiRig) serve(t *testing.T) (srv *httptest.Server, closed chan struct{}) {
	t.Helper()
	closed = make(chan struct{}, 64)
	srv = httptest.NewUnstartedServer(r.h)
	srv.Config.ConnContext = r.h.connContext
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, closed
}

// pull asks srv for path with key on client and returns the status and
// body.
func pull(t *testing.T, client *http.Client, srv *httptest.Server, path, key string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	req.Header.Set("X-Api-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(resp.StatusCode) + " " + string(body)
}

// rawRequest sends a GET of path with key on a connection of its own,
// which it returns unread.
func rawRequest(t *testing.T, addr, path, key string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: protectd\r\nX-Api-Key: %s\r\n\r\n", path, key); err != nil {
		t.Fatal(err)
	}
	return c
}

func waitClosed(t *testing.T, closed chan struct{}) {
	t.Helper()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not close the connection within 30s")
	}
}

// TestLAPILostAnswer: an answer whose bouncer dropped the connection
// after the status line is sent again on its next pull, exactly, and
// then not again.
func TestLAPILostAnswer(t *testing.T) {
	r := newLAPIRig(t)
	srv, closed := r.serve(t)
	client := srv.Client()
	const path = "/v1/decisions/stream"
	old := r.ban(t, "198.51.100.7", protect.BanOptions{For: time.Hour})
	dOld := dec(old, "Ip", "198.51.100.7", "manual", "1h0m0s", "2026-11-29T13:00:00Z")
	if got, want := pull(t, client, srv, path+"?startup=true", keyA), "200 "+stream(nil, []string{dOld}); got != want {
		t.Fatalf("startup pull = %s, want %s", got, want)
	}
	added := r.ban(t, "203.0.113.9", protect.BanOptions{For: time.Hour, Reason: "scanner"})
	if _, err := r.p.Lift(context.Background(), "198.51.100.7", "test"); err != nil {
		t.Fatal(err)
	}
	dAdded := dec(added, "Ip", "203.0.113.9", "scanner", "1h0m0s", "2026-11-29T13:00:00Z")

	// A bouncer that reads the status line and goes.
	c := rawRequest(t, srv.Listener.Addr().String(), path, keyA)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "HTTP/1.1 200 OK\r\n" {
		t.Fatalf("status line = %q, %v; want HTTP/1.1 200 OK", line, err)
	}
	c.Close()
	waitClosed(t, closed)

	pAdded := prior(added, "Ip", "203.0.113.9", "1h0m0s", "2026-11-29T13:00:00Z")
	if got, want := pull(t, client, srv, path, keyA), "200 "+stream([]string{dOld, pAdded}, []string{dAdded}); got != want {
		t.Errorf("pull after a lost answer = %s\nwant %s", got, want)
	}
	if got, want := pull(t, client, srv, path, keyA), "200 "+stream(nil, nil); got != want {
		t.Errorf("pull after that, on the same connection = %s\nwant %s", got, want)
	}
}

// TestLAPINewConnections: a bouncer that opens a connection for each
// pull gets each change in two answers, never in more.
func TestLAPINewConnections(t *testing.T) {
	r := newLAPIRig(t)
	const path = "/v1/decisions/stream"
	r.getOn(t, 10, path+"?startup=true", keyA, 200, stream(nil, nil))
	b := r.ban(t, "203.0.113.9", protect.BanOptions{For: time.Hour})
	d := dec(b, "Ip", "203.0.113.9", "manual", "1h0m0s", "2026-11-29T13:00:00Z")
	p := prior(b, "Ip", "203.0.113.9", "1h0m0s", "2026-11-29T13:00:00Z")
	r.getOn(t, 11, path, keyA, 200, stream([]string{p}, []string{d}))
	r.getOn(t, 12, path, keyA, 200, stream([]string{p}, []string{d}))
	r.getOn(t, 13, path, keyA, 200, stream(nil, nil))
	// On the connection of the last answer, nothing is sent twice.
	if _, err := r.p.Lift(context.Background(), "203.0.113.9", "test"); err != nil {
		t.Fatal(err)
	}
	r.getOn(t, 13, path, keyA, 200, stream([]string{d}, nil))
	r.getOn(t, 13, path, keyA, 200, stream(nil, nil))
}

// TestLAPIFilters: the filters CrowdSec's bouncers send select, on both
// endpoints, case aside; a name CrowdSec does not know is a 400 that
// names it.
func TestLAPIFilters(t *testing.T) {
	r := newLAPIRig(t)
	host := r.ban(t, "203.0.113.7", protect.BanOptions{For: time.Hour, Reason: "credential stuffing"})
	rng := r.ban(t, "198.51.100.0/24", protect.BanOptions{For: 2 * time.Hour, Reason: "escalated"})
	dHost := dec(host, "Ip", "203.0.113.7", "credential stuffing", "1h0m0s", "2026-11-29T13:00:00Z")
	dRange := dec(rng, "Range", "198.51.100.0/24", "escalated", "2h0m0s", "2026-11-29T14:00:00Z")
	both, none := []string{dRange, dHost}, []string(nil)
	unknown := func(name, v, want string) string {
		return fmt.Sprintf(`{"message":"%s: unknown \"%s\" (want %s)"}`, name, v, want)
	}
	const scopes, origins, types = "ip, range, country, as", "cscli, crowdsec, console, cscli-import, lists, capi, remediation_sync, protect", "ban, captcha, throttle"
	tests := []struct {
		query string
		want  []string // the decisions selected, with status 200
		err   string   // else the 400's body
	}{
		{"", both, ""},
		{"scopes=ip,range", both, ""},
		{"scopes=Ip", []string{dHost}, ""},
		{"scopes=RANGE", []string{dRange}, ""},
		{"scopes=ip,%20range,", both, ""},
		{"scopes=country,AS", none, ""},
		{"scope=range", []string{dRange}, ""},
		{"scopes=bogus", nil, unknown("scopes", "bogus", scopes)},
		{"scopes=ip,rnage", nil, unknown("scopes", "rnage", scopes)},
		{"scope=username", nil, unknown("scope", "username", scopes)},
		{"origins=crowdsec,cscli", none, ""},
		{"origins=CAPI,lists", none, ""},
		{"origins=protect", both, ""},
		{"origins=crowdsec,Protect", both, ""},
		{"origins=crowdsec,bogus", nil, unknown("origins", "bogus", origins)},
		{"type=ban", both, ""},
		{"type=BAN", both, ""},
		{"type=captcha", none, ""},
		{"type=bogus", nil, unknown("type", "bogus", types)},
		{"scenarios_containing=STUFFING", []string{dHost}, ""},
		{"scenarios_not_containing=stuffing,ssh", []string{dRange}, ""},
		{"scenarios_containing=ssh", none, ""},
	}
	for _, tt := range tests {
		if tt.err != "" {
			r.get(t, "/v1/decisions/stream?startup=true&"+tt.query, keyA, 400, tt.err)
			r.get(t, "/v1/decisions?"+tt.query, keyA, 400, tt.err)
			continue
		}
		r.get(t, "/v1/decisions/stream?startup=true&"+tt.query, keyA, 200, stream(nil, tt.want))
		r.get(t, "/v1/decisions?"+tt.query, keyA, 200, list(tt.want...))
	}

	// A bouncer that pulled everything and then asks with a misspelled
	// filter, or one that selects nothing, is told of no deletion.
	const path = "/v1/decisions/stream"
	r.get(t, path+"?startup=true", keyB, 200, stream(nil, both))
	r.get(t, path+"?scopes=bogus", keyB, 400, unknown("scopes", "bogus", scopes))
	r.get(t, path+"?origins=crowdsec", keyB, 200, stream(nil, nil))
	r.get(t, path, keyB, 200, stream(nil, nil))
}

// TestLAPIPlaceLost: when the journal no longer holds what changed since
// a bouncer's place (trimmed away, or more keys than historyMax), the
// pull is answered as a first one, every decision in force as new, and
// the log says so; the pull after goes on from there.
func TestLAPIPlaceLost(t *testing.T) {
	for _, tc := range []struct {
		name       string
		length     int // the memory journal's length
		historyMax int
	}{
		{"trimmed", 2, lapiHistoryMax},
		{"too many keys", 100, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testclock.New()
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			st := memstore.New(memstore.Options{Clock: clock.Now, JournalLength: tc.length})
			t.Cleanup(func() { st.Close() })
			p, err := protect.New(protect.Config{Clock: clock.Now, Logger: quiet, Store: st})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			r := &lapiRig{p: p, clock: clock}
			var log strings.Builder
			r.h = lapiOf(p, nil, []string{keyA}, clock.Now, slog.New(slog.NewTextHandler(&log, nil)))
			r.h.opt.historyMax = tc.historyMax
			const path = "/v1/decisions/stream"
			// A place in a journal that holds an event: one taken in an
			// empty journal reads from its start (see position).
			first := r.ban(t, "192.0.2.9", protect.BanOptions{For: time.Hour})
			dFirst := dec(first, "Ip", "192.0.2.9", "manual", "1h0m0s", "2026-11-29T13:00:00Z")
			r.get(t, path+"?startup=true", keyA, 200, stream(nil, []string{dFirst}))
			var all []string
			for _, ip := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
				b := r.ban(t, ip, protect.BanOptions{For: time.Hour})
				all = append(all, dec(b, "Ip", ip, "manual", "1h0m0s", "2026-11-29T13:00:00Z"))
			}
			r.get(t, path, keyA, 200, stream(nil, append(all, dFirst)))
			if got := r.h.lost.Load(); got != 1 {
				t.Errorf("lost = %d, want 1", got)
			}
			if n := strings.Count(log.String(), "the journal no longer holds what changed since this bouncer's place"); n != 1 {
				t.Errorf("log has %d lines of a lost place, want 1:\n%s", n, log.String())
			}
			if _, err := p.Lift(context.Background(), "192.0.2.3", "test"); err != nil {
				t.Fatal(err)
			}
			r.get(t, path, keyA, 200, stream([]string{all[2]}, nil))
		})
	}
}

// listerOf lists bans as they are.
type listerOf []protect.Ban

func (l listerOf) Bans(context.Context, admin.Filter) ([]protect.Ban, error) { return l, nil }

// TestLAPISkipsMalformed: a record the store cannot read refuses
// nothing, and is no decision: sent, it would be a permanent ban.
func TestLAPISkipsMalformed(t *testing.T) {
	clock := testclock.New()
	bad := protect.Ban{Key: protect.Key{Prefix: netip.MustParsePrefix("192.0.2.9/32")}, Malformed: `bad JSON "{"`}
	good := protect.Ban{Key: protect.Key{Prefix: netip.MustParsePrefix("192.0.2.1/32")}, Reason: "r", Created: clock.Now(), Expires: clock.Now().Add(time.Hour)}
	r := &lapiRig{clock: clock, h: newLAPI(listerOf{bad, good}, nil, nil, []string{keyA}, clock.Now, slog.New(slog.NewTextHandler(io.Discard, nil)))}
	d := dec(good, "Ip", "192.0.2.1", "r", "1h0m0s", "2026-11-29T13:00:00Z")
	r.get(t, "/v1/decisions/stream?startup=true", keyA, 200, stream(nil, []string{d}))
	r.get(t, "/v1/decisions?ip=192.0.2.9", keyA, 200, "null")
}
