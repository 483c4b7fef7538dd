package protect

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect/challenge"
	"github.com/httpprotect/protect/internal/logtest"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

// challengeProtector: 2 requests allowed, challenged from the 3rd
// (After defaults to MaxRequests), banned past 6.
func challengeProtector(t *testing.T, cc ChallengeConfig) (*Protector, *fakeClock, http.Handler) {
	t.Helper()
	if cc.Secret == nil {
		cc.Secret = testSecret
	}
	if cc.Difficulty == 0 {
		cc.Difficulty = 4
	}
	p, clk := newTestProtector(t, Config{MaxRequests: 2, BanLimit: 6, Challenge: &cc})
	h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	return p, clk, h
}

type client struct {
	t      *testing.T
	h      http.Handler
	addr   string
	cookie *http.Cookie
}

func (c *client) get(target string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", target, nil)
	r.RemoteAddr = c.addr + ":1234"
	if c.cookie != nil {
		r.AddCookie(c.cookie)
	}
	w := httptest.NewRecorder()
	c.h.ServeHTTP(w, r)
	return w
}

func (c *client) post(form url.Values) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", challenge.DefaultPath, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = c.addr + ":1234"
	w := httptest.NewRecorder()
	c.h.ServeHTTP(w, r)
	return w
}

var nonceField = regexp.MustCompile(`name="nonce" value="([^"]+)"`)

// page checks that w is the challenge page and returns its nonce.
func page(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	if w.Code != http.StatusForbidden {
		t.Fatalf("status %d, want 403: %s", w.Code, w.Body)
	}
	for k, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": challenge.CSP,
		"Cache-Control":           "no-store",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"Ratelimit":               `"protect";r=0;t=10`,
		"Ratelimit-Policy":        `"protect";q=2;w=10`,
	} {
		if got := w.Header().Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if got := w.Header().Get("Retry-After"); got != "" {
		t.Errorf("Retry-After %q on a challenge", got)
	}
	m := nonceField.FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("no nonce in the page:\n%s", w.Body)
	}
	return m[1]
}

// wrongAnswer returns a well-formed answer to nonce that does not do the
// work at difficulty 4.
func wrongAnswer(nonce string) string {
	for i := 0; ; i++ {
		if a := strconv.Itoa(i); !challenge.Works(nonce, a, 4) {
			return a
		}
	}
}

func answerForm(nonce, answer, ret string) url.Values {
	return url.Values{challenge.FieldNonce: {nonce}, challenge.FieldAnswer: {answer}, challenge.FieldReturn: {ret}}
}

// count returns the stream's count of addr so far.
func count(t *testing.T, p *Protector, addr string) int64 {
	t.Helper()
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = addr + ":1"
	d, _ := p.request(context.Background(), r, 0)
	return d.Count
}

func TestChallengeMiddleware(t *testing.T) {
	p, _, h := challengeProtector(t, ChallengeConfig{})
	c := &client{t: t, h: h, addr: "203.0.113.7"}
	for i := range 2 {
		if w := c.get("/a?x=1"); w.Code != 200 {
			t.Fatalf("request %d: %d", i+1, w.Code)
		}
	}
	w := c.get("/a?x=1")
	nonce := page(t, w)
	if !strings.Contains(w.Body.String(), `name="return" value="/a?x=1"`) {
		t.Errorf("the page does not return to /a?x=1:\n%s", w.Body)
	}
	answer := challenge.Solve(nonce, 4)
	w = c.post(answerForm(nonce, answer, "/a?x=1"))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/a?x=1" {
		t.Fatalf("answer: %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	ck := cookies[0]
	if ck.Name != challenge.CookieName || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Secure || ck.Path != "/" || ck.MaxAge != 3600 {
		t.Fatalf("cookie %+v", ck)
	}
	if got := count(t, p, c.addr); got != 3 {
		t.Fatalf("count after a right answer: %d, want 3 (no failure)", got)
	}
	c.cookie = ck
	for i := 4; i <= 6; i++ { // served, still counted
		if w := c.get("/a?x=1"); w.Code != 200 || w.Body.String() != "ok" {
			t.Fatalf("request %d with the pass: %d", i, w.Code)
		}
	}
	if w := c.get("/a"); w.Code != 403 || !strings.Contains(w.Body.String(), `"code":"banned"`) {
		t.Fatalf("request 7 with the pass: %d %s, want banned", w.Code, w.Body)
	}
	st := p.Stats()
	if st.Decisions[Allowed] != 5 || st.Decisions[Challenged] != 1 || st.Decisions[Banned] != 1 || st.Penalties != 0 {
		t.Fatalf("decisions %v, penalties %d", st.Decisions, st.Penalties)
	}
}

func TestChallengeReplay(t *testing.T) {
	p, _, h := challengeProtector(t, ChallengeConfig{})
	c := &client{t: t, h: h, addr: "198.51.100.9"}
	c.get("/")
	c.get("/")
	nonce := page(t, c.get("/"))
	f := answerForm(nonce, challenge.Solve(nonce, 4), "/")
	if w := c.post(f); w.Code != http.StatusSeeOther {
		t.Fatalf("first answer: %d", w.Code)
	}
	w := c.post(f)
	page(t, w) // refused: a fresh page
	if len(w.Result().Cookies()) != 0 {
		t.Fatal("a replay got a cookie")
	}
	if got, st := count(t, p, c.addr), p.Stats(); got != 4 || st.Penalties != 1 {
		t.Fatalf("count %d, penalties %d; want 4, 1", got, st.Penalties)
	}
}

func TestChallengeWrongAnswersBan(t *testing.T) {
	p, clk, h := challengeProtector(t, ChallengeConfig{NonceTTL: 2 * time.Second})
	c := &client{t: t, h: h, addr: "2001:db8:1:2::5"}
	c.get("/")
	c.get("/")
	nonce := page(t, c.get("/")) // count 3
	other := &client{t: t, h: h, addr: "2001:db8:9::1"}
	tries := []struct {
		name string
		form url.Values
	}{
		{"wrong answer", answerForm(nonce, "x", "/")},
		{"not a form", url.Values{}},
		{"nonce of another key", answerForm(func() string {
			other.get("/")
			other.get("/")
			n := page(t, other.get("/"))
			return n
		}(), "0", "/")},
		{"wrong answer past BanLimit", answerForm(nonce, wrongAnswer(nonce), "/")},
	}
	for i, tt := range tries {
		w := c.post(tt.form)
		if want := int64(4 + i); i < 3 && count(t, p, c.addr) != want { // a ban has no count
			t.Fatalf("%s: count %d, want %d", tt.name, count(t, p, c.addr), want)
		}
		if i < 3 {
			page(t, w)
		} else if w.Code != 403 || !strings.Contains(w.Body.String(), `"code":"banned"`) {
			t.Fatalf("%s: %d %s, want banned at count 7", tt.name, w.Code, w.Body)
		}
	}
	// An expired nonce counts too.
	d := &client{t: t, h: h, addr: "192.0.2.44"}
	d.get("/")
	d.get("/")
	n := page(t, d.get("/"))
	clk.Advance(2 * time.Second) // NonceTTL, within TTL
	page(t, d.post(answerForm(n, challenge.Solve(n, 4), "/")))
	if got := count(t, p, d.addr); got != 4 {
		t.Fatalf("expired nonce: count %d, want 4", got)
	}
	if st := p.Stats(); st.Penalties != 5 {
		t.Fatalf("penalties %d, want 5", st.Penalties)
	}
}

func TestChallengeBorrowedPass(t *testing.T) {
	p, _, h := challengeProtector(t, ChallengeConfig{})
	a := &client{t: t, h: h, addr: "203.0.113.1"}
	a.get("/")
	a.get("/")
	n := page(t, a.get("/"))
	w := a.post(answerForm(n, challenge.Solve(n, 4), "/"))
	pass := w.Result().Cookies()[0]

	b := &client{t: t, h: h, addr: "203.0.113.2", cookie: pass}
	b.get("/")
	b.get("/")
	page(t, b.get("/")) // the 3rd request, and one failure for the borrowed pass
	if got, st := count(t, p, b.addr), p.Stats(); got != 4 || st.Penalties != 1 {
		t.Fatalf("count %d, penalties %d; want 4, 1", got, st.Penalties)
	}
	page(t, b.get("/")) // 5, 6
	if w := b.get("/"); w.Code != 403 || !strings.Contains(w.Body.String(), `"code":"banned"`) {
		t.Fatalf("borrower: %d %s, want banned at 7 (8)", w.Code, w.Body)
	}
}

func TestChallengeAnswerPath(t *testing.T) {
	_, _, h := challengeProtector(t, ChallengeConfig{Path: "/_c"})
	r := httptest.NewRequest("GET", "/_c", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 405 || w.Header().Get("Allow") != "POST" {
		t.Fatalf("GET of the answer path: %d", w.Code)
	}
	c := &client{t: t, h: h, addr: "192.0.2.1"}
	c.get("/")
	c.get("/")
	if w := c.get("/"); !strings.Contains(w.Body.String(), `action="/_c"`) {
		t.Fatalf("the page does not post to /_c:\n%s", w.Body)
	}
}

func TestChallengeCountStatus(t *testing.T) {
	cc := ChallengeConfig{Secret: testSecret, Difficulty: 4}
	p, _ := newTestProtector(t, Config{MaxRequests: 2, BanLimit: 4, Challenge: &cc, CountStatus: func(s int) bool { return s == 401 }})
	h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(401) }))
	c := &client{t: t, h: h, addr: "192.0.2.7"}
	for range 3 {
		c.get("/")
	}
	page(t, c.get("/")) // 3 failures; this attempt counts: 4
	if got := count(t, p, c.addr); got != 4 {
		t.Fatalf("count %d, want 4", got)
	}
	if w := c.get("/"); w.Code != 403 || !strings.Contains(w.Body.String(), `"code":"banned"`) {
		t.Fatalf("%d %s, want banned", w.Code, w.Body)
	}
}

func TestChallengeConfig(t *testing.T) {
	for name, tt := range map[string]struct {
		cfg   Config
		field string
	}{
		"After below MaxRequests": {Config{MaxRequests: 10, Challenge: &ChallengeConfig{After: 5}}, "Challenge.After"},
		"After at BanLimit":       {Config{MaxRequests: 10, BanLimit: 20, Challenge: &ChallengeConfig{After: 20}}, "Challenge.After"},
		"short Secret":            {Config{Challenge: &ChallengeConfig{Secret: []byte("short")}}, "Challenge.Secret"},
		"Difficulty":              {Config{Challenge: &ChallengeConfig{Difficulty: 33}}, "Challenge.Difficulty"},
		"PassTTL":                 {Config{Challenge: &ChallengeConfig{PassTTL: -time.Second}}, "Challenge.PassTTL"},
		"Path":                    {Config{Challenge: &ChallengeConfig{Path: "c"}}, "Challenge.Path"},
		"Plan":                    {Config{Plan: mustPlan(t, "p", Rate{Limit: 1, Period: time.Second}), Challenge: &ChallengeConfig{}}, "Challenge"},
	} {
		t.Run(name, func(t *testing.T) {
			var ce *ConfigError
			if err := tt.cfg.Validate(); !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("Validate = %v, want a ConfigError of %s", err, tt.field)
			}
		})
	}
	cc := &ChallengeConfig{}
	var rec logtest.Recorder
	p, err := New(Config{Challenge: cc, Logger: slog.New(&rec)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := p.Config().Challenge
	if cc.After != 0 || cc.Path != "" || got.After != DefaultMaxRequests || got.Difficulty != challenge.DefaultDifficulty ||
		got.PassTTL != time.Hour || got.NonceTTL != 5*time.Minute || got.Path != "/.protect/challenge" {
		t.Fatalf("defaults %+v; the caller's %+v", got, cc)
	}
	if n := len(rec.Records()); n != 1 || !strings.Contains(rec.Records()[0]["msg"], "random") {
		t.Fatalf("log %v, want one line of the random secret", rec.Records())
	}
}

func TestChallengeStatus(t *testing.T) {
	d := Decision{Status: Challenged}
	if !d.Refused() || d.StatusCode() != 403 || Challenged.String() != "challenged" || Challenged.Code() != "challenged" || Challenged != Blocked+1 {
		t.Fatalf("Challenged: refused %v, %d, %s", d.Refused(), d.StatusCode(), Challenged)
	}
}

// FuzzChallengeAnswer posts any form to the answer path: it never
// panics, answers 303 to a same-origin path or refuses, and gives a
// cookie only for an answer that does the work.
func FuzzChallengeAnswer(f *testing.F) {
	cc := ChallengeConfig{Secret: testSecret, Difficulty: 4}
	p, err := New(Config{MaxRequests: 1, BanLimit: 1 << 40, Challenge: &cc, Logger: discardLogger()})
	if err != nil {
		f.Fatal(err)
	}
	defer p.Close()
	h := p.Middleware(http.NotFoundHandler())
	n := p.chal.c.Nonce("203.0.113.7")
	f.Add(n, challenge.Solve(n, 4), "/a?b=c")
	f.Add(n, "0", "//evil.example/")
	f.Add("", "", "")
	f.Add("a.b", "99999999999999999999", "https://evil.example/")
	f.Fuzz(func(t *testing.T, nonce, answer, ret string) {
		body := url.Values{challenge.FieldNonce: {nonce}, challenge.FieldAnswer: {answer}, challenge.FieldReturn: {ret}}.Encode()
		r := httptest.NewRequest("POST", challenge.DefaultPath, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.RemoteAddr = "203.0.113.7:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusSeeOther:
			loc := w.Header().Get("Location")
			if !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || strings.ContainsAny(loc, "\\\r\n") {
				t.Fatalf("Location %q", loc)
			}
		case http.StatusForbidden, http.StatusTooManyRequests:
		default:
			t.Fatalf("status %d", w.Code)
		}
		if len(w.Result().Cookies()) > 0 && !challenge.Works(nonce, answer, 4) {
			t.Fatalf("a cookie for an answer that does no work")
		}
	})
}
