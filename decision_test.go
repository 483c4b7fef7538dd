package protect

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/clientaddr"
)

// sfItem is one member of an RFC 9651 List whose bare items are strings
// and whose parameters are integers, as RateLimit and RateLimit-Policy are.
type sfItem struct {
	name   string
	params map[string]int64
}

// parseSFList parses the subset of RFC 9651 (Structured Field Values)
// these fields use, strictly: sf-string items, ";key=integer" parameters,
// members separated by "," with optional white space.
func parseSFList(s string) ([]sfItem, error) {
	var items []sfItem
	i := 0
	for {
		if i >= len(s) || s[i] != '"' {
			return nil, fmt.Errorf("at %d: want sf-string", i)
		}
		j := i + 1
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' || s[j] < 0x20 || s[j] > 0x7e {
				return nil, fmt.Errorf("at %d: bad string character", j)
			}
			j++
		}
		if j >= len(s) {
			return nil, fmt.Errorf("unterminated string")
		}
		it := sfItem{name: s[i+1 : j], params: map[string]int64{}}
		i = j + 1
		for i < len(s) && s[i] == ';' {
			i++
			k := i
			for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= '0' && s[i] <= '9' || s[i] == '_' || s[i] == '-' || s[i] == '.' || s[i] == '*') {
				i++
			}
			key := s[k:i]
			if key == "" || key[0] < 'a' || key[0] > 'z' || i >= len(s) || s[i] != '=' {
				return nil, fmt.Errorf("at %d: bad parameter key", k)
			}
			i++
			n := i
			if i < len(s) && s[i] == '-' {
				i++
			}
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i++
			}
			if i-n > 15 {
				return nil, fmt.Errorf("integer too long")
			}
			v, err := strconv.ParseInt(s[n:i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("at %d: want integer", n)
			}
			it.params[key] = v
		}
		items = append(items, it)
		if i == len(s) {
			return items, nil
		}
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) || s[i] != ',' {
			return nil, fmt.Errorf("at %d: want ','", i)
		}
		i++
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
}

func TestResponseHeaders(t *testing.T) {
	p, clk := newTestProtector(t, Config{MaxRequests: 2, BanLimit: 3, TTL: 2500 * time.Millisecond, BanDuration: 90 * time.Second})
	addr := netip.MustParseAddr("192.0.2.7")
	type want struct {
		status             Status
		code               int
		r, t               int64
		retryAfter         string
		noStore, rateLimit bool
	}
	steps := []want{
		{Allowed, 200, 1, 3, "", false, true},
		{Allowed, 200, 0, 3, "", false, true},
		{Limited, 429, 0, 3, "3", true, true}, // TTL 2.5s rounds up
		{Banned, 403, 0, 90, "90", true, true},
	}
	for i, w := range steps {
		d, _ := p.VerifyAddr(t.Context(), addr)
		h := http.Header{}
		d.WriteHeaders(h)
		if d.Status != w.status || d.StatusCode() != w.code || h.Get("Retry-After") != w.retryAfter || (h.Get("Cache-Control") == "no-store") != w.noStore {
			t.Fatalf("step %d: VerifyAddr(%s) = %v %d, headers %v; want %v %d, Retry-After %q, no-store %v", i+1, addr, d.Status, d.StatusCode(), h, w.status, w.code, w.retryAfter, w.noStore)
		}
		pol, err := parseSFList(h.Get("RateLimit-Policy"))
		if err != nil || len(pol) != 1 || pol[0].name != "protect" || pol[0].params["q"] != 2 || pol[0].params["w"] != 3 {
			t.Fatalf("step %d: parseSFList(RateLimit-Policy %q) = %+v, %v; want \"protect\";q=2;w=3", i+1, h.Get("RateLimit-Policy"), pol, err)
		}
		rl, err := parseSFList(h.Get("RateLimit"))
		if err != nil || len(rl) != 1 || rl[0].name != "protect" || rl[0].params["r"] != w.r || rl[0].params["t"] != w.t {
			t.Fatalf("step %d: parseSFList(RateLimit %q) = %+v, %v; want \"protect\";r=%d;t=%d", i+1, h.Get("RateLimit"), rl, err, w.r, w.t)
		}
	}
	// The ban's Retry-After counts down with the clock, rounded up.
	clk.Advance(30*time.Second + time.Millisecond)
	d, _ := p.VerifyAddr(t.Context(), addr)
	h := http.Header{}
	d.WriteHeaders(h)
	if h.Get("Retry-After") != "60" || !strings.HasSuffix(h.Get("RateLimit"), ";t=60") {
		t.Fatalf("VerifyAddr(%s) after 30s: Retry-After %q, RateLimit %q; want 60, t=60", addr, h.Get("Retry-After"), h.Get("RateLimit"))
	}
}

func TestProblemBody(t *testing.T) {
	tests := []struct {
		d          Decision
		code       int
		problem    string
		retryAfter int64
	}{
		{Decision{Status: Limited, RetryAfter: 10 * time.Second}, 429, "rate_limited", 10},
		{Decision{Status: Banned, RetryAfter: 1500 * time.Millisecond, code: 403}, 403, "banned", 2},
		{Decision{Status: Banned, code: 451}, 451, "banned", 0},
		{Decision{Status: Unknown, code: 400, Err: clientaddr.ErrBadEntry}, 400, "unknown_client", 0},
		{Decision{Status: Unavailable, RetryAfter: time.Second, Err: fmt.Errorf("dial tcp 10.1.2.3:6379: connection refused")}, 503, "unavailable", 1},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		tt.d.WriteResponse(w)
		var body struct {
			Status     int    `json:"status"`
			Code       string `json:"code"`
			Title      string `json:"title"`
			Detail     string `json:"detail"`
			RetryAfter int64  `json:"retry_after"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%v: json.Unmarshal(WriteResponse body %q) = %v", tt.d.Status, w.Body, err)
		}
		if w.Code != tt.code || body.Status != tt.code || body.Code != tt.problem || body.RetryAfter != tt.retryAfter ||
			body.Title != http.StatusText(tt.code) || w.Header().Get("Content-Type") != "application/problem+json" ||
			w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%v: WriteResponse = %d %+v %v; want %d, problem %q, retry_after %d, problem+json, no-store", tt.d.Status, w.Code, body, w.Header(), tt.code, tt.problem, tt.retryAfter)
		}
		if strings.Contains(w.Body.String(), "6379") || strings.Contains(w.Body.String(), "forwarding") {
			t.Errorf("%v: WriteResponse body = %s, want no error text in it", tt.d.Status, w.Body)
		}
	}
	// An allowed decision writes nothing.
	w := httptest.NewRecorder()
	Decision{Status: Allowed}.WriteResponse(w)
	if w.Body.Len() != 0 || len(w.Header()) != 0 {
		t.Fatalf("Decision{Allowed}.WriteResponse wrote %v %q, want nothing", w.Header(), w.Body)
	}
}

func TestStatusStrings(t *testing.T) {
	want := "allowed safe limited banned unknown unavailable"
	var got []string
	for s := Allowed; s <= Unavailable; s++ {
		got = append(got, s.String())
	}
	if strings.Join(got, " ") != want {
		t.Fatalf("Status.String() for Allowed…Unavailable = %v, want %s", got, want)
	}
}
