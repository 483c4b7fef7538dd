package admin_test

import (
	"crypto/tls"
	"encoding/json"
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

const dashToken = "0123456789abcdef0123456789abcdef"

// dash is a Dashboard over one memory protector, on a test clock.
type dash struct {
	h     http.Handler
	p     *protect.Protector
	clock *testclock.Clock
}

func newDash(t *testing.T) *dash {
	t.Helper()
	return newDashCfg(t, admin.DashboardConfig{Token: dashToken})
}

// do sends one request; hdr are name, value pairs, and a pair named
// Host sets the request's Host.
func (d *dash) do(method, target, body string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			r.Host = hdr[i+1]
			continue
		}
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	d.h.ServeHTTP(w, r)
	return w
}

// login logs in and returns the session cookie and its CSRF token.
func (d *dash) login(t *testing.T) (cookie, csrf string) {
	t.Helper()
	w := d.do("POST", "/login", url.Values{"token": {dashToken}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Origin", "http://example.com", "Sec-Fetch-Site", "same-origin")
	res := w.Result()
	if w.Code != http.StatusSeeOther || len(res.Cookies()) != 1 || w.Header().Get("Location") != "./" {
		t.Fatalf("POST /login with the token = %d, Location %q, cookies %v; want 303 to ./ and one cookie", w.Code, w.Header().Get("Location"), res.Cookies())
	}
	c := res.Cookies()[0]
	if c.Name != admin.SessionCookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/" {
		t.Fatalf("session cookie = %+v, want %s, HttpOnly, SameSite=Strict, not Secure without TLS, Path /", c, admin.SessionCookie)
	}
	cookie = admin.SessionCookie + "=" + c.Value
	page := d.do("GET", "/", "", "Cookie", cookie)
	m := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`).FindStringSubmatch(page.Body.String())
	if page.Code != 200 || m == nil {
		t.Fatalf("GET / with the session = %d %q, want the dashboard with its CSRF token", page.Code, page.Body.String())
	}
	return cookie, m[1]
}

// The login form takes the token once; a wrong one is the form again,
// 401, and no cookie.
func TestDashboardLogin(t *testing.T) {
	d := newDash(t)
	w := d.do("GET", "/", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `<form id="login"`) {
		t.Fatalf("GET / without a session = %d, want 200 and the login form", w.Code)
	}
	for _, tc := range []struct {
		name      string
		token     string
		hdr       []string
		wantCode  int
		wantError string
	}{
		{"wrong token", "wrong", []string{"Sec-Fetch-Site", "same-origin"}, 401, "Wrong token."},
		{"empty token", "", nil, 401, "Wrong token."},
		{"the token from another site", dashToken, []string{"Sec-Fetch-Site", "cross-site"}, 403, "This login did not come from this page."},
		{"the token from another origin", dashToken, []string{"Origin", "http://evil.example"}, 403, "This login did not come from this page."},
	} {
		hdr := append([]string{"Content-Type", "application/x-www-form-urlencoded"}, tc.hdr...)
		w := d.do("POST", "/login", url.Values{"token": {tc.token}}.Encode(), hdr...)
		if w.Code != tc.wantCode || len(w.Result().Cookies()) != 0 || !strings.Contains(w.Body.String(), tc.wantError) || !strings.Contains(w.Body.String(), `<form id="login"`) {
			t.Errorf("POST /login, %s = %d, cookies %v; want %d, no cookie, the form saying %q", tc.name, w.Code, w.Result().Cookies(), tc.wantCode, tc.wantError)
		}
	}
	cookie, _ := d.login(t)
	for _, bad := range []string{cookie + "x", admin.SessionCookie + "=", admin.SessionCookie + "=a.b", strings.Replace(cookie, ".", "A.", 1)} {
		if w := d.do("GET", "/ui/now", "", "Cookie", bad); w.Code != 401 {
			t.Errorf("GET /ui/now with cookie %q = %d, want 401", bad, w.Code)
		}
	}
	if w := d.do("GET", "/ui/now", "", "Cookie", cookie); w.Code != 200 {
		t.Errorf("GET /ui/now with the session = %d, want 200", w.Code)
	}
	d.clock.Advance(admin.DefaultSessionLength)
	if w := d.do("GET", "/ui/now", "", "Cookie", cookie); w.Code != 401 {
		t.Errorf("GET /ui/now with a session %v old = %d, want 401", admin.DefaultSessionLength, w.Code)
	}
}

// Over TLS the session cookie is Secure, and the origin a write must
// come from is https.
func TestDashboardTLS(t *testing.T) {
	d := newDash(t)
	r := httptest.NewRequest("POST", "https://example.com/login", strings.NewReader(url.Values{"token": {dashToken}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", "https://example.com")
	r.TLS = &tls.ConnectionState{}
	w := httptest.NewRecorder()
	d.h.ServeHTTP(w, r)
	c := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || len(c) != 1 || !c[0].Secure || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("POST /login over TLS = %d, cookies %v; want 303 and a Secure, HttpOnly, SameSite=Strict cookie", w.Code, c)
	}
	r = httptest.NewRequest("POST", "https://example.com/login", strings.NewReader(url.Values{"token": {dashToken}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", "http://example.com")
	r.TLS = &tls.ConnectionState{}
	w = httptest.NewRecorder()
	d.h.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
		t.Fatalf("POST /login over TLS from Origin http://example.com = %d, want 403 and no cookie", w.Code)
	}
}

// The API takes the bearer token or the session; a write with the
// session needs the CSRF token and the same origin; a wrong bearer token
// is 401 whatever cookie comes with it. Nothing refused is written.
func TestDashboardAuth(t *testing.T) {
	d := newDash(t)
	cookie, csrf := d.login(t)
	ban := `{"targets": ["203.0.113.9"]}`
	same := []string{"Sec-Fetch-Site", "same-origin", "Origin", "http://example.com"}
	for _, tc := range []struct {
		name   string
		method string
		hdr    []string
		want   int
	}{
		{"nothing", "POST", nil, 401},
		{"a wrong bearer token", "POST", []string{"Authorization", "Bearer " + dashToken + "x"}, 401},
		{"a wrong bearer token and the session", "POST", append([]string{"Authorization", "Bearer nope", "Cookie", cookie, admin.HeaderCSRF, csrf}, same...), 401},
		{"the token without Bearer", "POST", []string{"Authorization", dashToken}, 401},
		{"the session without the CSRF token", "POST", append([]string{"Cookie", cookie}, same...), 403},
		{"the session with a wrong CSRF token", "POST", append([]string{"Cookie", cookie, admin.HeaderCSRF, csrf + "x"}, same...), 403},
		{"the session from a same-site page", "POST", []string{"Cookie", cookie, admin.HeaderCSRF, csrf, "Sec-Fetch-Site", "same-site"}, 403},
		{"the session from a cross-site form", "POST", []string{"Cookie", cookie, "Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example", "Content-Type", "text/plain"}, 403},
		{"the session from another origin", "POST", []string{"Cookie", cookie, admin.HeaderCSRF, csrf, "Origin", "http://evil.example"}, 403},
		{"a lift with the session without the CSRF token", "DELETE", append([]string{"Cookie", cookie}, same...), 403},
	} {
		target := "/v1/bans"
		if tc.method == "DELETE" {
			target = "/v1/bans?all=true"
		}
		w := d.do(tc.method, target, ban, tc.hdr...)
		var p admin.Problem
		json.Unmarshal(w.Body.Bytes(), &p)
		wantCode := map[int]string{401: admin.CodeUnauthorized, 403: admin.CodeForbidden}[tc.want]
		if w.Code != tc.want || p.Code != wantCode {
			t.Errorf("%s /v1/bans with %s = %d %s, want %d %s", tc.method, tc.name, w.Code, p.Code, tc.want, wantCode)
		}
	}
	if st := d.p.Stats(); st.ManualBans != 0 || st.BansLifted != 0 {
		t.Fatalf("after refused writes: %d bans written, %d lifted; want none", st.ManualBans, st.BansLifted)
	}
	if w := d.do("POST", "/v1/bans", ban, append([]string{"Cookie", cookie, admin.HeaderCSRF, csrf}, same...)...); w.Code != 201 {
		t.Errorf("POST /v1/bans with the session and its CSRF token = %d %s, want 201", w.Code, w.Body)
	}
	if w := d.do("POST", "/v1/bans", `{"targets": ["203.0.113.10"]}`, "Authorization", "Bearer "+dashToken); w.Code != 201 {
		t.Errorf("POST /v1/bans with the bearer token = %d %s, want 201", w.Code, w.Body)
	}
	if w := d.do("GET", "/v1/bans", "", "Cookie", cookie); w.Code != 200 || w.Header().Get(admin.HeaderTotal) != "2" {
		t.Errorf("GET /v1/bans with the session = %d, %s %q; want 200, 2", w.Code, admin.HeaderTotal, w.Header().Get(admin.HeaderTotal))
	}
	if w := d.do("POST", "/logout", url.Values{"csrf": {"wrong"}}.Encode(), "Cookie", cookie, "Content-Type", "application/x-www-form-urlencoded"); w.Code != 403 {
		t.Errorf("POST /logout with a wrong CSRF token = %d, want 403", w.Code)
	}
	w := d.do("POST", "/logout", url.Values{"csrf": {csrf}}.Encode(), "Cookie", cookie, "Content-Type", "application/x-www-form-urlencoded")
	if c := w.Result().Cookies(); w.Code != 303 || len(c) != 1 || c[0].MaxAge >= 0 {
		t.Errorf("POST /logout = %d, cookies %v; want 303 and the cookie cleared", w.Code, c)
	}
}

// Every answer carries the strict CSP; the assets are the embedded
// files, with their types; the pages load no inline script or style.
func TestDashboardAssets(t *testing.T) {
	d := newDash(t)
	cookie, _ := d.login(t)
	for _, tc := range []struct{ path, cookie, wantType string }{
		{"/", "", "text/html; charset=utf-8"},
		{"/", cookie, "text/html; charset=utf-8"},
		{"/assets/app.js", "", "text/javascript; charset=utf-8"},
		{"/assets/app.css", "", "text/css; charset=utf-8"},
		{"/ui/now", cookie, "application/json"},
	} {
		w := d.do("GET", tc.path, "", "Cookie", tc.cookie)
		csp := w.Header().Get("Content-Security-Policy")
		if w.Code != 200 || w.Header().Get("Content-Type") != tc.wantType || !strings.HasPrefix(csp, "default-src 'none'; script-src 'self'; style-src 'self';") {
			t.Errorf("GET %s = %d, %q, CSP %q; want 200, %q, the strict CSP", tc.path, w.Code, w.Header().Get("Content-Type"), csp, tc.wantType)
		}
		if strings.HasSuffix(tc.wantType, "html; charset=utf-8") {
			body, _ := io.ReadAll(w.Body)
			if regexp.MustCompile(`<script>|<style|\sstyle="|\son[a-z]+="`).Match(body) {
				t.Errorf("GET %s holds inline script or style, which the CSP refuses", tc.path)
			}
		}
	}
	if w := d.do("GET", "/assets/nope.js", ""); w.Code != 404 {
		t.Errorf("GET /assets/nope.js = %d, want 404", w.Code)
	}
}

// /ui/now reports each protector's decisions by status and the keys
// refused most.
func TestDashboardNow(t *testing.T) {
	clock := testclock.New()
	p, err := protect.New(protect.Config{Clock: clock.Now, MaxRequests: 1, BanLimit: 100, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	refused := admin.NewRefused(2, clock.Now)
	h := admin.Dashboard(admin.DashboardConfig{Token: dashToken, Refused: refused, Clock: clock.Now}, p)
	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "203.0.113.5:1000"
		if d, _ := p.Verify(r.Context(), r); d.Refused() {
			refused.Add(d.Key.String(), d.Status)
		}
	}
	r := httptest.NewRequest("GET", "/ui/now", nil)
	r.Header.Set("Authorization", "Bearer "+dashToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var now admin.NowRecord
	if err := json.Unmarshal(w.Body.Bytes(), &now); err != nil || len(now.Protectors) != 1 {
		t.Fatalf("GET /ui/now = %d %s, want one protector", w.Code, w.Body)
	}
	got := now.Protectors[0].Decisions
	if got["allowed"] != 1 || got["limited"] != 2 || len(got) != len(now.Statuses) || len(now.Statuses) != 9 {
		t.Errorf("GET /ui/now decisions = %v of statuses %v, want allowed 1, limited 2 of 9", got, now.Statuses)
	}
	if len(now.Refused) != 1 || now.Refused[0].Key != "203.0.113.5" || now.Refused[0].Count != 2 || now.Refused[0].Status != "limited" {
		t.Errorf("GET /ui/now refused = %+v, want 203.0.113.5 limited twice", now.Refused)
	}
}

// Refused keeps the keys refused most in its size: a new key takes the
// place of the least, inheriting its count as its error; a key not
// refused for RefusedWindow leaves.
func TestRefused(t *testing.T) {
	clock := testclock.New()
	r := admin.NewRefused(2, clock.Now)
	for _, k := range []string{"a", "a", "a", "b", "c", "c"} {
		r.Add(k, protect.Banned)
	}
	got := r.Top(0)
	want := []admin.RefusedKey{
		{Key: "a", Count: 3, Status: "banned", Last: clock.Now()},
		{Key: "c", Count: 3, Error: 1, Status: "banned", Last: clock.Now()},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Top(0) = %+v, want %+v", got, want)
	}
	if got := r.Top(1); len(got) != 1 || got[0].Key != "a" {
		t.Errorf("Top(1) = %+v, want a alone", got)
	}
	clock.Advance(admin.RefusedWindow - time.Second)
	r.Add("c", protect.Limited)
	clock.Advance(time.Second)
	if got := r.Top(0); len(got) != 1 || got[0].Key != "c" || got[0].Count != 4 || got[0].Status != "limited" {
		t.Errorf("Top(0) after a's window = %+v, want c alone, 4, limited", got)
	}
	var none *admin.Refused
	none.Add("x", protect.Banned)
	if got := none.Top(0); len(got) != 0 {
		t.Errorf("nil Refused Top(0) = %v, want none", got)
	}
}

// No cookie a client makes up opens a session, and none panics the
// reader.
func FuzzDashboardCookie(f *testing.F) {
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.AAAA")
	f.Add("..")
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	p, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { p.Close() })
	h := admin.Dashboard(admin.DashboardConfig{Token: dashToken}, p)
	f.Fuzz(func(t *testing.T, v string) {
		r := httptest.NewRequest("GET", "/ui/now", nil)
		r.AddCookie(&http.Cookie{Name: admin.SessionCookie, Value: v})
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 401 {
			t.Fatalf("GET /ui/now with cookie %q = %d, want 401", v, w.Code)
		}
	})
}

// Without a token every request is let through, whatever its
// Authorization, as Handler lets it; a browser's write from another
// origin is not, and a session from the form binds the CSRF token.
func TestDashboardNoToken(t *testing.T) {
	p, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	d := &dash{h: admin.Dashboard(admin.DashboardConfig{}, p), p: p}
	ban := `{"targets": ["203.0.113.9"]}`
	for _, tc := range []struct {
		name string
		hdr  []string
		want int
	}{
		{"a tool", nil, 201},
		{"a tool with a bearer token", []string{"Authorization", "Bearer anything"}, 201},
		{"a page of the same origin", []string{"Host", "127.0.0.1:8090", "Sec-Fetch-Site", "same-origin", "Origin", "http://127.0.0.1:8090"}, 201},
		{"a cross-site form", []string{"Host", "127.0.0.1:8090", "Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"}, 403},
		{"another origin", []string{"Host", "127.0.0.1:8090", "Origin", "http://evil.example"}, 403},
	} {
		if w := d.do("POST", "/v1/bans", ban, tc.hdr...); w.Code != tc.want {
			t.Errorf("POST /v1/bans without a token, from %s = %d %s, want %d", tc.name, w.Code, w.Body, tc.want)
		}
	}
	w := d.do("POST", "/login", "token=", "Content-Type", "application/x-www-form-urlencoded")
	if len(w.Result().Cookies()) != 1 {
		t.Fatalf("POST /login without a token = %d, cookies %v; want a session", w.Code, w.Result().Cookies())
	}
	cookie := admin.SessionCookie + "=" + w.Result().Cookies()[0].Value
	if w := d.do("POST", "/v1/bans", ban, "Host", "localhost:8090", "Cookie", cookie, "Sec-Fetch-Site", "same-origin"); w.Code != 403 {
		t.Errorf("POST /v1/bans with a session and no CSRF token = %d, want 403", w.Code)
	}
}

// Whatever a client sends to the dashboard, it answers below 500 and
// writes nothing without the token or the session's CSRF token.
func FuzzDashboard(f *testing.F) {
	f.Add("POST", "/v1/bans", `{"targets": ["203.0.113.9"]}`, "", "same-origin", "")
	f.Add("DELETE", "/v1/bans?all=true", "", "Bearer x", "cross-site", "http://evil.example")
	f.Add("POST", "/login", "token=abc", "", "same-origin", "http://example.com")
	f.Add("GET", "/assets/../ui/index.html", "", "", "", "")
	f.Add("POST", "/logout", "csrf=x", "", "", "")
	p, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { p.Close() })
	h := admin.Dashboard(admin.DashboardConfig{Token: dashToken}, p)
	f.Fuzz(func(t *testing.T, method, target, body, auth, site, origin string) {
		r, ok := fuzzRequest(method, target, body, "GET", "POST", "DELETE", "HEAD")
		if !ok {
			return
		}
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for name, v := range map[string]string{"Authorization": auth, "Sec-Fetch-Site": site, "Origin": origin} {
			if v != "" {
				r.Header.Set(name, v)
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s %s = %d %q, want below 500", method, target, w.Code, w.Body)
		}
		if st := p.Stats(); st.ManualBans != 0 || st.BansLifted != 0 {
			t.Fatalf("%s %s with Authorization %q wrote %d bans, lifted %d; want nothing without the token", method, target, auth, st.ManualBans, st.BansLifted)
		}
		if c := w.Result().Cookies(); len(c) > 0 && c[0].Value != "" {
			t.Fatalf("%s %s %q = a session cookie, without the token", method, target, body)
		}
	})
}
