package challenge

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/testclock"
)

const testDifficulty = 8

func newTest(t *testing.T, clk *testclock.Clock, secret string) *Challenger {
	t.Helper()
	c, gen, err := New(Config{Secret: []byte(secret), Difficulty: testDifficulty, NonceTTL: time.Minute, PassTTL: time.Hour, Clock: clk.Now})
	if err != nil || gen {
		t.Fatalf("New = %v, generated %v", err, gen)
	}
	return c
}

// wrong returns an answer to nonce that does not do the work.
func wrong(nonce string, difficulty int) string {
	for i := 0; ; i++ {
		a := strings.Repeat("9", 1) + string(rune('0'+i%10)) + strings.Repeat("1", i/10)
		if !Works(nonce, a, difficulty) {
			return a
		}
	}
}

func TestVerify(t *testing.T) {
	const key = "203.0.113.7/32"
	clk := testclock.New()
	c := newTest(t, clk, "0123456789abcdef0123456789abcdef")
	other := newTest(t, clk, "another secret, 16 bytes or more")
	tests := []struct {
		name  string
		nonce func() string
		key   string
		ans   func(nonce string) string
		wait  time.Duration
		want  error
	}{
		{"solved", func() string { return c.Nonce(key) }, key, nil, 0, nil},
		{"solved just before expiry", func() string { return c.Nonce(key) }, key, nil, time.Minute - time.Second, nil},
		{"expired", func() string { return c.Nonce(key) }, key, nil, time.Minute, ErrExpired},
		{"another key", func() string { return c.Nonce(key) }, "203.0.113.8/32", nil, 0, ErrKey},
		{"another secret", func() string { return other.Nonce(key) }, key, nil, 0, ErrSignature},
		{"a pass is no nonce", func() string { v, _ := c.Pass(key); return v }, key, nil, 0, ErrMalformed},
		{"too little work", func() string { return c.Nonce(key) }, key, func(n string) string { return wrong(n, testDifficulty) }, 0, ErrWork},
		{"answer not a number", func() string { return c.Nonce(key) }, key, func(string) string { return "12a" }, 0, ErrMalformed},
		{"answer empty", func() string { return c.Nonce(key) }, key, func(string) string { return "" }, 0, ErrMalformed},
		{"answer too long", func() string { return c.Nonce(key) }, key, func(string) string { return strings.Repeat("1", 21) }, 0, ErrMalformed},
		{"garbage", func() string { return "x.y" }, key, nil, 0, ErrMalformed},
		{"no dot", func() string { return "abc" }, key, nil, 0, ErrMalformed},
		{"empty", func() string { return "" }, key, nil, 0, ErrMalformed},
		{"tampered payload", func() string {
			b := []byte(c.Nonce(key))
			b[20] = map[bool]byte{true: 'B', false: 'A'}[b[20] == 'A'] // in the random part
			return string(b)
		}, key, nil, 0, ErrSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.nonce()
			ans := "0"
			if tt.ans != nil {
				ans = tt.ans(n)
			} else if strings.Contains(n, ".") && len(n) > 10 {
				ans = Solve(n, testDifficulty)
			}
			clk.Advance(tt.wait)
			if err := c.Verify(tt.key, n, ans); !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyReplay(t *testing.T) {
	const key = "2001:db8:1:2::/64"
	clk := testclock.New()
	c := newTest(t, clk, "0123456789abcdef0123456789abcdef")
	n := c.Nonce(key)
	a := Solve(n, testDifficulty)
	if err := c.Verify(key, n, a); err != nil {
		t.Fatalf("first answer: %v", err)
	}
	if err := c.Verify(key, n, a); !errors.Is(err, ErrReplay) {
		t.Fatalf("second answer: %v, want ErrReplay", err)
	}
	// Another instance with the secret has not seen it: the set is per
	// process (docs/challenge.md).
	peer := newTest(t, clk, "0123456789abcdef0123456789abcdef")
	if err := peer.Verify(key, n, a); err != nil {
		t.Fatalf("answer on another instance: %v", err)
	}
	if got := c.Spent(); got != 1 {
		t.Fatalf("Spent = %d, want 1", got)
	}
}

// The spent set holds at most MaxSpent: past it the oldest is forgotten,
// so that one client answering many nonces never stops another's
// answer; expired ones go first; a replay of one still kept is refused.
func TestSpentBounded(t *testing.T) {
	const key = "198.51.100.1/32"
	clk := testclock.New()
	c, _, err := New(Config{Secret: bytes.Repeat([]byte{1}, 16), Difficulty: 1, NonceTTL: time.Minute, MaxSpent: 3, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	var nonces []string
	answer := func(k string) error {
		n := c.Nonce(k)
		nonces = append(nonces, n)
		return c.Verify(k, n, Solve(n, 1))
	}
	for i := range 5 {
		if err := answer(key); err != nil {
			t.Fatalf("answer %d, MaxSpent 3: %v, want nil", i, err)
		}
		if got, want := c.Spent(), min(i+1, 3); got != want {
			t.Fatalf("Spent after %d answers = %d, want %d", i+1, got, want)
		}
	}
	if err := answer("203.0.113.9/32"); err != nil {
		t.Fatalf("another key's answer with the set full: %v, want nil", err)
	}
	// Kept: the last three, 3 and 4 of key's and the other key's.
	for _, i := range []int{3, 4} {
		if err := c.Verify(key, nonces[i], Solve(nonces[i], 1)); !errors.Is(err, ErrReplay) {
			t.Fatalf("replay of answer %d, still kept: %v, want ErrReplay", i, err)
		}
	}
	// Forgotten: a replay gets in, for the key its answer was for.
	if err := c.Verify(key, nonces[0], Solve(nonces[0], 1)); err != nil {
		t.Fatalf("replay of answer 0, forgotten: %v, want nil", err)
	}
	clk.Advance(time.Minute) // every one expires, and goes at the next answer
	if err := answer(key); err != nil {
		t.Fatalf("answer after expiry: %v", err)
	}
	if got := c.Spent(); got != 1 {
		t.Fatalf("Spent = %d, want 1", got)
	}
}

func TestPass(t *testing.T) {
	const key = "203.0.113.7/32"
	clk := testclock.New()
	c := newTest(t, clk, "0123456789abcdef0123456789abcdef")
	peer := newTest(t, clk, "0123456789abcdef0123456789abcdef")
	other := newTest(t, clk, "another secret, 16 bytes or more")
	v, exp := c.Pass(key)
	if want := clk.Now().Add(time.Hour); !exp.Equal(want) {
		t.Fatalf("expires %v, want %v", exp, want)
	}
	tests := []struct {
		name  string
		c     *Challenger
		key   string
		value string
		wait  time.Duration
		want  error
	}{
		{"valid", c, key, v, 0, nil},
		{"another instance, one secret", peer, key, v, 0, nil},
		{"another secret", other, key, v, 0, ErrSignature},
		{"another key", c, "203.0.113.8/32", v, 0, ErrKey},
		{"a nonce is no pass", c, key, c.Nonce(key), 0, ErrSignature},
		{"garbage", c, key, "nope", 0, ErrMalformed},
		{"expired", c, key, v, time.Hour, ErrExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Advance(tt.wait)
			if err := tt.c.CheckPass(tt.key, tt.value); !errors.Is(err, tt.want) {
				t.Fatalf("CheckPass = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDifficulty(t *testing.T) {
	clk := testclock.New()
	for _, d := range []int{1, 4, 8, 12} {
		c, _, err := New(Config{Secret: bytes.Repeat([]byte{2}, 16), Difficulty: d, Clock: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		n := c.Nonce("k")
		a := Solve(n, d)
		sum := sha256.Sum256([]byte(n + a))
		if got := LeadingZeros(sum[:]); got < d {
			t.Fatalf("difficulty %d: Solve's answer has %d leading zeros", d, got)
		}
		if err := c.Verify("k", n, a); err != nil {
			t.Fatalf("difficulty %d: %v", d, err)
		}
	}
	for _, tt := range []struct {
		b    []byte
		want int
	}{{[]byte{0x80}, 0}, {[]byte{0x01}, 7}, {[]byte{0, 0x40}, 9}, {[]byte{0, 0}, 16}} {
		if got := LeadingZeros(tt.b); got != tt.want {
			t.Errorf("LeadingZeros(%x) = %d, want %d", tt.b, got, tt.want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Secret: []byte("short")},
		{Difficulty: MaxDifficulty + 1},
		{Difficulty: -1},
		{NonceTTL: -time.Second},
	} {
		if _, _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error", cfg)
		}
	}
	c, gen, err := New(Config{})
	if err != nil || !gen || c.Difficulty() != DefaultDifficulty || c.PassTTL() != DefaultPassTTL {
		t.Fatalf("New(Config{}) = %v, generated %v, difficulty %d", err, gen, c.Difficulty())
	}
}

func TestSafeReturn(t *testing.T) {
	for in, want := range map[string]string{
		"/":                    "/",
		"/a/b?x=1&y=2":         "/a/b?x=1&y=2",
		"/a#frag":              "/a",
		"":                     "/",
		"//evil.example/":      "/",
		"/\\evil.example":      "/",
		"https://evil.example": "/",
		"evil":                 "/",
		"/a\nb":                "/",
		"javascript:alert(1)":  "/",
		"/%2F%2Fevil":          "/%2F%2Fevil",
	} {
		if got := SafeReturn(in); got != want {
			t.Errorf("SafeReturn(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPage(t *testing.T) {
	w := httptest.NewRecorder()
	Page{Nonce: "n.m", Difficulty: 16, Action: DefaultPath, Return: `/a?b="<x>"`}.Write(w, 403)
	if w.Code != 403 {
		t.Fatalf("status %d", w.Code)
	}
	body := w.Body.String()
	for _, want := range []string{`data-bits="16"`, `value="n.m"`, `action="/.protect/challenge"`, "<noscript>", "<script>" + script + "</script>", "<style>" + style + "</style>", `value="/a?b=&#34;&lt;x&gt;&#34;"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "http") {
		t.Errorf("page names an external resource:\n%s", body)
	}
	if got := w.Header().Get("Content-Security-Policy"); got != CSP || !strings.Contains(CSP, cspHash(script)) {
		t.Errorf("CSP %q", got)
	}
}
