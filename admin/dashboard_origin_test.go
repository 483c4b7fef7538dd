package admin_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/testclock"
)

// newDashCfg is a Dashboard of cfg over one memory protector on a test
// clock, which cfg.Clock is set to.
func newDashCfg(t *testing.T, cfg admin.DashboardConfig) *dash {
	t.Helper()
	clock := testclock.New()
	p, err := protect.New(protect.Config{Clock: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	cfg.Clock = clock.Now
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &dash{h: admin.Dashboard(cfg, p), p: p, clock: clock}
}

// Without a token, a browser's request must name a loopback Host,
// localhost or a configured origin's: a page on another name that
// resolves to the listener (DNS rebinding) reads and writes nothing. A
// tool's request, which no page can make, goes through on any Host.
func TestDashboardNoTokenRebinding(t *testing.T) {
	ban := `{"targets":["203.0.113.9"],"reason":"rebind"}`
	browser := func(host string) []string {
		return []string{"Host", host, "Origin", "http://" + host, "Sec-Fetch-Site", "same-origin", "Content-Type", "text/plain"}
	}
	for _, tc := range []struct {
		name    string
		origins []string
		method  string
		target  string
		hdr     []string
		want    int
	}{
		{"rebinding page bans", nil, "POST", "/v1/bans", browser("rebind.attacker.example:8090"), 403},
		{"rebinding page lifts all", nil, "DELETE", "/v1/bans?all=true", browser("rebind.attacker.example:8090"), 403},
		{"rebinding page reads", nil, "GET", "/v1/bans", []string{"Host", "rebind.attacker.example", "Sec-Fetch-Site", "same-origin"}, 403},
		{"rebinding page logs in", nil, "POST", "/login", browser("rebind.attacker.example"), 403},
		{"rebinding page opens the dashboard", nil, "GET", "/", []string{"Host", "rebind.attacker.example", "User-Agent", "Mozilla/5.0"}, 403},
		{"an old browser's rebinding page", nil, "POST", "/v1/bans", []string{"Host", "rebind.attacker.example", "User-Agent", "Mozilla/5.0"}, 403},
		{"127.0.0.1", nil, "POST", "/v1/bans", browser("127.0.0.1:8090"), 201},
		{"127.9.9.9", nil, "POST", "/v1/bans", browser("127.9.9.9"), 201},
		{"[::1]", nil, "POST", "/v1/bans", browser("[::1]:8090"), 201},
		{"localhost", nil, "POST", "/v1/bans", browser("localhost:8090"), 201},
		{"LOCALHOST", nil, "POST", "/v1/bans", []string{"Host", "LOCALHOST:8090", "Sec-Fetch-Site", "same-origin"}, 201},
		{"localhost.attacker.example", nil, "POST", "/v1/bans", browser("localhost.attacker.example"), 403},
		{"a configured origin", []string{"https://admin.example.com"}, "POST", "/v1/bans",
			[]string{"Host", "admin.example.com", "Origin", "https://admin.example.com", "Sec-Fetch-Site", "same-origin"}, 201},
		{"not the configured origin", []string{"https://admin.example.com"}, "POST", "/v1/bans", browser("other.example.com"), 403},
		{"a tool on a socket", nil, "POST", "/v1/bans", []string{"Host", "unix"}, 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDashCfg(t, admin.DashboardConfig{Origins: tc.origins})
			d.p.Ban(context.Background(), "198.51.100.1", protect.BanOptions{For: time.Hour})
			w := d.do(tc.method, tc.target, ban, tc.hdr...)
			if w.Code != tc.want {
				t.Fatalf("%s %s from %s = %d %s, want %d", tc.method, tc.target, tc.name, w.Code, w.Body, tc.want)
			}
			if tc.want == 403 {
				if st := d.p.Stats(); st.ManualBans != 1 || st.BansLifted != 0 {
					t.Errorf("after the refused %s: %d bans written, %d lifted; want 1 (the test's own), 0", tc.name, st.ManualBans, st.BansLifted)
				}
				if strings.Contains(w.Body.String(), "198.51.100.1") || strings.Contains(w.Body.String(), "csrf-token") {
					t.Errorf("the refused %s got the dashboard's data: %s", tc.name, w.Body)
				}
			}
		})
	}
}

// ParseOrigin takes scheme://host[:port] alone, and returns it as a
// browser's Origin header says it.
func TestParseOrigin(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://admin.example.com", "https://admin.example.com"},
		{"HTTPS://Admin.Example.com:443", "https://admin.example.com"},
		{"http://admin.example.com:80/", "http://admin.example.com"},
		{"http://127.0.0.1:8090", "http://127.0.0.1:8090"},
		{"https://[2001:DB8::1]:8443", "https://[2001:db8::1]:8443"},
		{"admin.example.com", ""},
		{"ftp://admin.example.com", ""},
		{"https://", ""},
		{"https://admin.example.com/admin", ""},
		{"https://admin.example.com?x=1", ""},
		{"https://user@admin.example.com", ""},
		{"https://admin.example.com:", ""},
		{"https://admin.example.com#x", ""},
		{"", ""},
	} {
		got, err := admin.ParseOrigin(tc.in)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("ParseOrigin(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// Behind a proxy that terminates TLS, or sets Host to the upstream, the
// configured origins let the browser log in and write; the cookie is
// Secure for an https origin; another origin is refused.
func TestDashboardBehindProxy(t *testing.T) {
	d := newDashCfg(t, admin.DashboardConfig{Token: dashToken, Origins: []string{"https://admin.example.com"}})
	form := url.Values{"token": {dashToken}}.Encode()
	var cookie string
	for _, tc := range []struct {
		name, host, origin string
		want               int
	}{
		{"TLS ended by the proxy", "admin.example.com", "https://admin.example.com", 303},
		{"Host set to the upstream", "127.0.0.1:8090", "https://admin.example.com", 303},
		{"the listener's own origin, not configured", "127.0.0.1:8090", "http://127.0.0.1:8090", 403},
		{"another origin", "admin.example.com", "https://evil.example", 403},
	} {
		w := d.do("POST", "/login", form, "Host", tc.host, "Origin", tc.origin, "Sec-Fetch-Site", "same-origin",
			"Content-Type", "application/x-www-form-urlencoded")
		c := w.Result().Cookies()
		if w.Code != tc.want || (tc.want == 303) != (len(c) == 1) {
			t.Fatalf("POST /login, %s = %d, cookies %v; want %d", tc.name, w.Code, c, tc.want)
		}
		if tc.want == 303 {
			if !c[0].Secure {
				t.Errorf("POST /login, %s: cookie Secure = false, want true for an https origin", tc.name)
			}
			cookie = c[0].Name + "=" + c[0].Value
		}
	}
	page := d.do("GET", "/", "", "Host", "127.0.0.1:8090", "Cookie", cookie)
	m := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`).FindStringSubmatch(page.Body.String())
	if m == nil {
		t.Fatalf("GET / with the session = %d, want the dashboard", page.Code)
	}
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"https://admin.example.com", 201},
		{"http://127.0.0.1:8090", 403},
	} {
		w := d.do("POST", "/v1/bans", `{"targets":["203.0.113.9"]}`, "Host", "127.0.0.1:8090", "Cookie", cookie,
			admin.HeaderCSRF, m[1], "Origin", tc.origin, "Sec-Fetch-Site", "same-origin")
		if w.Code != tc.want {
			t.Errorf("POST /v1/bans with the session from %s = %d %s, want %d", tc.origin, w.Code, w.Body, tc.want)
		}
	}
	// An http origin among them gets no Secure cookie; TLS always does.
	d = newDashCfg(t, admin.DashboardConfig{Token: dashToken, Origins: []string{"http://admin.internal:8090"}})
	w := d.do("POST", "/login", form, "Host", "127.0.0.1:8090", "Origin", "http://admin.internal:8090", "Content-Type", "application/x-www-form-urlencoded")
	if c := w.Result().Cookies(); w.Code != 303 || len(c) != 1 || c[0].Secure {
		t.Errorf("POST /login from http://admin.internal:8090 = %d, cookies %v; want 303 and a cookie not Secure", w.Code, c)
	}
	r := httptest.NewRequest("POST", "https://admin.internal:8090/login", strings.NewReader(form))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", "http://admin.internal:8090")
	r.TLS = &tls.ConnectionState{}
	rec := httptest.NewRecorder()
	d.h.ServeHTTP(rec, r)
	if c := rec.Result().Cookies(); rec.Code != 303 || len(c) != 1 || !c[0].Secure {
		t.Errorf("POST /login over TLS = %d, cookies %v; want 303 and a Secure cookie", rec.Code, c)
	}
}

// A proxy's own Authorization header (Basic, from its auth_basic) is not
// the admin token: the session cookie decides, on / and the API alike. A
// wrong Bearer header is refused on both, so the page is never served to
// a browser whose calls all fail.
func TestDashboardForeignAuthorization(t *testing.T) {
	d := newDash(t)
	cookie, _ := d.login(t)
	basic := "Basic b3BzOnNlY3JldA==" // ops:secret, the proxy's
	for _, tc := range []struct {
		name     string
		auth     string
		cookie   string
		wantPage int
		wantForm bool
		wantAPI  int
	}{
		{"the proxy's Basic and the session", basic, cookie, 200, false, 200},
		{"the proxy's Basic alone", basic, "", 200, true, 401},
		{"another scheme and the session", "Negotiate abc", cookie, 200, false, 200},
		{"lower-case bearer with the token", "bearer " + dashToken, "", 200, true, 200},
		{"a wrong Bearer and the session", "Bearer not-the-token", cookie, 401, true, 401},
	} {
		page := d.do("GET", "/", "", "Authorization", tc.auth, "Cookie", tc.cookie)
		form := strings.Contains(page.Body.String(), `<form id="login"`)
		api := d.do("GET", "/ui/now", "", "Authorization", tc.auth, "Cookie", tc.cookie)
		if page.Code != tc.wantPage || form != tc.wantForm || api.Code != tc.wantAPI {
			t.Errorf("%s: GET / = %d (login form %v), GET /ui/now = %d; want %d (%v), %d",
				tc.name, page.Code, form, api.Code, tc.wantPage, tc.wantForm, tc.wantAPI)
		}
	}
}

// A read with the session cookie runs only from the dashboard's own page
// (or the address bar): a same-site page, which SameSite=Strict sends the
// cookie from, gets 403 and reads nothing.
func TestDashboardReadNeedsOwnPage(t *testing.T) {
	d := newDash(t)
	cookie, _ := d.login(t)
	for _, tc := range []struct {
		site string
		want int
	}{
		{"", 200},
		{"same-origin", 200},
		{"none", 200},
		{"same-site", 403},
		{"cross-site", 403},
	} {
		for _, path := range []string{"/v1/bans?sort=-key&limit=0", "/ui/now"} {
			w := d.do("GET", path, "", "Cookie", cookie, "Sec-Fetch-Site", tc.site, "Sec-Fetch-Dest", "image")
			if w.Code != tc.want {
				t.Errorf("GET %s with the session, Sec-Fetch-Site %q = %d, want %d", path, tc.site, w.Code, tc.want)
			}
		}
	}
	if w := d.do("GET", "/v1/bans", "", "Authorization", "Bearer "+dashToken, "Sec-Fetch-Site", "cross-site"); w.Code != 200 {
		t.Errorf("GET /v1/bans with the bearer token, Sec-Fetch-Site cross-site = %d, want 200 (no page can send the header)", w.Code)
	}
}

// An events stream opened with a session ends when the session does: no
// event goes out after it.
func TestDashboardStreamEndsWithSession(t *testing.T) {
	d := newDashCfg(t, admin.DashboardConfig{Token: dashToken, SessionLength: time.Minute})
	w := d.do("POST", "/login", url.Values{"token": {dashToken}}.Encode(), "Content-Type", "application/x-www-form-urlencoded")
	c := w.Result().Cookies()
	if len(c) != 1 {
		t.Fatalf("POST /login = %d, cookies %v; want one", w.Code, c)
	}
	body := d.stream(t, c[0].Name+"="+c[0].Value)
	d.clock.Advance(time.Minute)
	d.p.Ban(context.Background(), "203.0.113.77", protect.BanOptions{For: time.Hour, Reason: "after expiry"})
	ended(t, body, "after expiry", "a session that has ended")
}

// A logout ends the session on the server too: a copy of the cookie is
// 401 after it, and a stream it opened sends nothing more.
func TestDashboardLogoutEndsSession(t *testing.T) {
	d := newDash(t)
	cookie, csrf := d.login(t)
	body := d.stream(t, cookie)
	w := d.do("POST", "/logout", url.Values{"csrf": {csrf}}.Encode(), "Cookie", cookie, "Content-Type", "application/x-www-form-urlencoded")
	if w.Code != 303 {
		t.Fatalf("POST /logout = %d, want 303", w.Code)
	}
	for _, path := range []string{"/ui/now", "/v1/bans"} {
		if w := d.do("GET", path, "", "Cookie", cookie); w.Code != 401 {
			t.Errorf("GET %s with a copy of the logged-out cookie = %d, want 401", path, w.Code)
		}
	}
	if w := d.do("GET", "/", "", "Cookie", cookie); !strings.Contains(w.Body.String(), `<form id="login"`) {
		t.Errorf("GET / with a copy of the logged-out cookie = %d, want the login form", w.Code)
	}
	d.p.Ban(context.Background(), "203.0.113.78", protect.BanOptions{For: time.Hour, Reason: "after logout"})
	ended(t, body, "after logout", "a logged-out session")
}

// stream opens the events stream of d with cookie (name=value) and
// returns the stream's whole body once it ends.
func (d *dash) stream(t *testing.T, cookie string) <-chan string {
	t.Helper()
	srv := httptest.NewServer(d.h)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("GET", srv.URL+"/v1/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cookie", cookie)
	res, err := srv.Client().Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /v1/events with the session = %v, %v; want 200", res, err)
	}
	t.Cleanup(func() { res.Body.Close() })
	body := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(res.Body)
		body <- string(b)
	}()
	return body
}

// ended checks that a stream ends within 10s without holding text.
func ended(t *testing.T, body <-chan string, text, what string) {
	t.Helper()
	select {
	case got := <-body:
		if strings.Contains(got, text) {
			t.Errorf("the stream of %s delivered %q", what, got)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the stream of %s is still open 10s on", what)
	}
}
