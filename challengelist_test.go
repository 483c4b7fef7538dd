package protect

import (
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/httpprotect/protect/challenge"
	"github.com/httpprotect/protect/internal/logtest"
)

func listOf(prefixes ...string) staticSource {
	var entries []BlockEntry
	for _, p := range prefixes {
		entries = append(entries, BlockEntry{Prefix: netip.MustParsePrefix(p), Note: "why"})
	}
	return staticSource{NewBlockSet(entries)}
}

// A client on a list marked Challenge gets the page from its first
// request, is served with a pass and still counted, and is banned past
// BanLimit; a blocking list wins over it whatever their order; a pass
// carried to another listed address is a failure; without
// Config.Challenge the entries are Blocked.
func TestChallengeBlockList(t *testing.T) {
	lists := []BlockList{
		{Name: "suspect", Source: listOf("192.0.2.0/24"), Challenge: true},
		{Name: "drop", Source: listOf("192.0.2.66/32")},
	}
	cc := &ChallengeConfig{Secret: testSecret, Difficulty: 4}
	p, _ := newTestProtector(t, Config{MaxRequests: 2, BanLimit: 6, Challenge: cc, BlockLists: lists})
	h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))

	c := &client{t: t, h: h, addr: "192.0.2.7"}
	r, _ := http.NewRequest("GET", "/", nil)
	r.RemoteAddr = c.addr + ":1"
	if d, _ := p.Check(t.Context(), r); d.Status != Challenged || d.Ban == nil || d.Ban.By != "suspect" {
		t.Fatalf("Check(listed) = %v by %+v, want challenged by suspect", d.Status, d.Ban)
	}
	n := page(t, c.get("/a")) // count 1: within MaxRequests, still the page
	w := c.post(answerForm(n, challenge.Solve(n, 4), "/a"))
	if w.Code != http.StatusSeeOther || len(w.Result().Cookies()) != 1 {
		t.Fatalf("answer = %d with %d cookies, want 303 with the pass", w.Code, len(w.Result().Cookies()))
	}
	c.cookie = w.Result().Cookies()[0]
	for i := 2; i <= 6; i++ { // served, still counted
		if w := c.get("/a"); w.Code != 200 || w.Body.String() != "ok" {
			t.Fatalf("request %d with the pass = %d, want 200", i, w.Code)
		}
	}
	if w := c.get("/a"); w.Code != 403 || !strings.Contains(w.Body.String(), `"code":"banned"`) {
		t.Fatalf("request 7 with the pass = %d %s, want banned", w.Code, w.Body)
	}

	// The pass of 192.0.2.7 carried to 192.0.2.8: the page, and a failure.
	b := &client{t: t, h: h, addr: "192.0.2.8", cookie: c.cookie}
	page(t, b.get("/"))
	if got, want := count(t, p, b.addr), int64(2); got != want {
		t.Errorf("count(borrower) = %d, want %d (its request and the failure)", got, want)
	}

	reversed := []BlockList{lists[1], lists[0]}
	for _, tc := range []struct {
		name  string
		cc    *ChallengeConfig
		lists []BlockList
		addr  string
		want  Status
	}{
		{"blocking list after the challenge one", cc, lists, "192.0.2.66", Blocked},
		{"blocking list before the challenge one", cc, reversed, "192.0.2.66", Blocked},
		{"unlisted", cc, lists, "198.51.100.1", Allowed},
		{"listed to challenge", cc, lists, "192.0.2.9", Challenged},
		{"listed to challenge, after a blocking list", cc, reversed, "192.0.2.9", Challenged},
		{"no Config.Challenge", nil, lists, "192.0.2.9", Blocked},
	} {
		q, _ := newTestProtector(t, Config{MaxRequests: 2, BanLimit: 6, Challenge: tc.cc, BlockLists: tc.lists})
		d, _ := q.VerifyAddr(t.Context(), netip.MustParseAddr(tc.addr))
		if d.Status != tc.want {
			t.Errorf("%s: VerifyAddr(%s) = %v, want %v", tc.name, tc.addr, d.Status, tc.want)
		}
	}
}

// A list marked to challenge under a protector without Config.Challenge
// blocks, and New says so once for each such list.
func TestChallengeListWithoutChallenge(t *testing.T) {
	var rec logtest.Recorder
	p, err := New(Config{Logger: slog.New(&rec), BlockLists: []BlockList{
		{Name: "suspect", Source: listOf("192.0.2.0/24"), Challenge: true},
		{Name: "drop", Source: listOf("198.51.100.0/24")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var lines []string
	for _, r := range rec.Records() {
		if strings.Contains(r["msg"], "marked to challenge") {
			lines = append(lines, r["list"])
		}
	}
	if len(lines) != 1 || lines[0] != "suspect" {
		t.Fatalf("warnings of lists marked to challenge = %q, want one, of suspect", lines)
	}
}
