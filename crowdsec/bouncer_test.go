package crowdsec_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/crowdsec"
	"github.com/httpprotect/protect/internal/crowdsectest"
	"github.com/httpprotect/protect/internal/logtest"
	"github.com/httpprotect/protect/internal/testclock"
)

func TestMain(m *testing.M) {
	code := m.Run()
	crowdsectest.StopShared()
	os.Exit(code)
}

func newProtector(t *testing.T, b *crowdsec.Bouncer) *protect.Protector {
	t.Helper()
	p, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler), BlockLists: []protect.BlockList{b.BlockList()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func status(t *testing.T, p *protect.Protector, addr string) protect.Status {
	t.Helper()
	d, err := p.VerifyAddr(t.Context(), netip.MustParseAddr(addr))
	if err != nil {
		t.Fatal(err)
	}
	return d.Status
}

// run runs b.Run until the test ends.
func run(t *testing.T, b *crowdsec.Bouncer) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func poll(t *testing.T, b *crowdsec.Bouncer) {
	t.Helper()
	if err := b.Poll(t.Context()); err != nil {
		t.Fatalf("Poll: %v", err)
	}
}

// Against a real LAPI: cscli decisions add --ip and --range are refused
// after one poll, a captcha is not (it is not a ban) but is challenged by
// a protector with the challenge and ChallengeList, and cscli decisions
// delete lifts each after one poll.
func TestBouncerFollowsTheLAPI(t *testing.T) {
	l := crowdsectest.Shared(t)
	b, err := crowdsec.New(crowdsec.Options{URL: l.URL, Key: l.Bouncer(t), Interval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	p := newProtector(t, b)
	poll(t, b)
	if s := status(t, p, "192.0.2.77"); s != protect.Allowed {
		t.Fatalf("VerifyAddr(192.0.2.77) before any decision = %v, want allowed", s)
	}
	l.Cscli(t, "decisions", "add", "--ip", "192.0.2.77", "--duration", "1h", "--reason", "test ip")
	l.Cscli(t, "decisions", "add", "--range", "198.51.100.0/24", "--duration", "30m")
	l.Cscli(t, "decisions", "add", "--ip", "2001:db8::77", "--type", "captcha")
	poll(t, b)
	for addr, want := range map[string]protect.Status{
		"192.0.2.77": protect.Blocked, "198.51.100.9": protect.Blocked, "2001:db8::77": protect.Allowed, "192.0.2.78": protect.Allowed,
	} {
		if got := status(t, p, addr); got != want {
			t.Errorf("VerifyAddr(%s) after one poll = %v, want %v", addr, got, want)
		}
	}
	m := p.BlockListMatches(netip.MustParseAddr("192.0.2.77"))
	if len(m) != 1 || m[0].List != "crowdsec" || m[0].Source != l.URL || m[0].Entry.String() != "192.0.2.77/32" ||
		m[0].Note != "test ip" || time.Until(m[0].Expires) < 59*time.Minute || time.Until(m[0].Expires) > time.Hour {
		t.Errorf("BlockListMatches(192.0.2.77) = %+v, want crowdsec's 192.0.2.77/32, reason test ip, an hour left", m)
	}
	// With the challenge and ChallengeList, the captcha is the page; the
	// bans still block.
	pc, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler), Challenge: &protect.ChallengeConfig{Secret: []byte("0123456789abcdef")},
		BlockLists: []protect.BlockList{b.BlockList(), b.ChallengeList()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	for addr, want := range map[string]protect.Status{"2001:db8::77": protect.Challenged, "192.0.2.77": protect.Blocked, "192.0.2.78": protect.Allowed} {
		if got := status(t, pc, addr); got != want {
			t.Errorf("VerifyAddr(%s) with the challenge = %v, want %v; matches %+v, challenge set %d", addr, got, want, pc.BlockListMatches(netip.MustParseAddr(addr)), b.ChallengeList().Source.BlockSet().Len())
		}
	}
	if d, _ := pc.VerifyAddr(t.Context(), netip.MustParseAddr("2001:db8::77")); d.Ban == nil || d.Ban.By != crowdsec.ChallengeName {
		t.Errorf("VerifyAddr(2001:db8::77) with the challenge = by %+v, want by %s", d.Ban, crowdsec.ChallengeName)
	}
	// Types listing captcha refuses it outright, and ChallengeList is empty.
	bb, err := crowdsec.New(crowdsec.Options{URL: l.URL, Key: l.Bouncer(t), Types: []string{"ban", "captcha"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, bb)
	if got := status(t, newProtector(t, bb), "2001:db8::77"); got != protect.Blocked || bb.ChallengeList().Source.BlockSet().Len() != 0 {
		t.Errorf("VerifyAddr(2001:db8::77) with Types ban, captcha = %v, challenge entries %d; want blocked, 0", got, bb.ChallengeList().Source.BlockSet().Len())
	}
	d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("198.51.100.9"))
	if d.StatusCode() != 403 || d.RetryAfter != 0 || d.Ban == nil || d.Ban.By != "crowdsec" || d.Ban.Key.String() != "198.51.100.0/24" {
		t.Errorf("VerifyAddr(198.51.100.9) = %d, retry %v, ban %+v; want 403 by crowdsec's 198.51.100.0/24", d.StatusCode(), d.RetryAfter, d.Ban)
	}

	l.Cscli(t, "decisions", "delete", "--ip", "192.0.2.77")
	poll(t, b)
	if s := status(t, p, "192.0.2.77"); s != protect.Allowed {
		t.Errorf("VerifyAddr(192.0.2.77) one poll after the delete = %v, want allowed", s)
	}
	if s := status(t, p, "198.51.100.9"); s != protect.Blocked {
		t.Errorf("VerifyAddr(198.51.100.9) = %v, want still blocked", s)
	}
	l.Cscli(t, "decisions", "delete", "--range", "198.51.100.0/24")
	poll(t, b)
	if s := status(t, p, "198.51.100.9"); s != protect.Allowed {
		t.Errorf("VerifyAddr(198.51.100.9) one poll after the delete = %v, want allowed", s)
	}
	if st := b.BlockSourceStatus(); !st.Up || st.Errors != 0 {
		t.Errorf("BlockSourceStatus() = %+v, want up, no error", st)
	}
}

// Run drops a decision from the set when it ends, between polls: the
// LAPI sends nothing for a decision that runs out, and the next poll is a
// minute away.
func TestBouncerRunEndsDecisionsOnTime(t *testing.T) {
	l := crowdsectest.Shared(t)
	b, err := crowdsec.New(crowdsec.Options{URL: l.URL, Key: l.Bouncer(t), Interval: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	p := newProtector(t, b)
	l.Cscli(t, "decisions", "add", "--ip", "192.0.2.88", "--duration", "4s")
	run(t, b)
	waitStatus := func(want protect.Status, within time.Duration) time.Time {
		t.Helper()
		deadline := time.Now().Add(within)
		for status(t, p, "192.0.2.88") != want {
			if time.Now().After(deadline) {
				t.Fatalf("VerifyAddr(192.0.2.88) = %v after %v, want %v", status(t, p, "192.0.2.88"), within, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Now()
	}
	waitStatus(protect.Blocked, 5*time.Second) // the startup poll
	checked := b.BlockSourceStatus().Checked
	m := p.BlockListMatches(netip.MustParseAddr("192.0.2.88"))
	if len(m) != 1 || m[0].Expires.IsZero() {
		t.Fatalf("BlockListMatches(192.0.2.88) = %+v, want the decision with its end", m)
	}
	gone := waitStatus(protect.Allowed, 10*time.Second)
	if late := gone.Sub(m[0].Expires); late < 0 || late > time.Second {
		t.Errorf("lateness of the decision's leaving the set = %v, want 0 to 1s after its end", late)
	}
	if got := b.BlockSourceStatus().Checked; !got.Equal(checked) {
		t.Errorf("BlockSourceStatus().Checked = %v, want %v: no poll in between", got, checked)
	}
}

// A LAPI stopped mid-run keeps the last set in force, is logged down once
// however many polls fail, and up again once it answers.
func TestBouncerKeepsTheSetWhileTheLAPIIsDown(t *testing.T) {
	l := crowdsectest.Start(t)
	rec := &logtest.Recorder{}
	b, err := crowdsec.New(crowdsec.Options{URL: l.URL, Key: l.Bouncer(t), Interval: time.Second, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	p := newProtector(t, b)
	l.Cscli(t, "decisions", "add", "--ip", "203.0.113.66", "--duration", "1h")
	poll(t, b)
	l.Stop()
	for range 3 {
		if err := b.Poll(t.Context()); err == nil {
			t.Fatal("Poll of a stopped LAPI = nil, want an error")
		}
	}
	if s := status(t, p, "203.0.113.66"); s != protect.Blocked {
		t.Errorf("VerifyAddr(203.0.113.66) with the LAPI down = %v, want blocked: the last set stays", s)
	}
	st := p.Stats().BlockLists
	if len(st) != 1 || st[0].Up || st[0].Errors != 3 || st[0].Entries != 1 {
		t.Errorf("Stats().BlockLists = %+v, want crowdsec down, 3 errors, 1 entry", st)
	}
	if n := rec.Count("protect/crowdsec: LAPI down; the last decisions stay in force"); n != 1 {
		t.Errorf("the outage was logged %d times, want 1", n)
	}
	l.Restart(t)
	poll(t, b)
	if n := rec.Count("protect/crowdsec: LAPI up"); n != 2 {
		t.Errorf("LAPI up was logged %d times, want 2 (start, recovery)", n)
	}
	if s := status(t, p, "203.0.113.66"); s != protect.Blocked {
		t.Errorf("VerifyAddr(203.0.113.66) after the restart = %v, want blocked", s)
	}
}

// What the real LAPI does not send on demand: a null body, decisions of
// other scopes, and a decision that runs out between polls (the fake
// clock). The server is checked for the key, the User-Agent and startup.
func TestBouncerStreamForms(t *testing.T) {
	var calls atomic.Int32
	bodies := []string{
		`{"new":[{"id":1,"duration":"2s","scope":"Ip","type":"ban","value":"192.0.2.1","scenario":"crowdsecurity/ssh-bf"},
			{"id":2,"duration":"1h","scope":"Country","type":"ban","value":"FR"},
			{"id":3,"duration":"-1.5s","scope":"Ip","type":"ban","value":"192.0.2.3"},
			{"id":4,"duration":"4h","scope":"range","type":"BAN","value":"2001:db8::1/64"},
			{"id":5,"duration":"bogus","scope":"Ip","type":"ban","value":"192.0.2.5"},
			{"id":6,"duration":"1h","scope":"Ip","type":"ban","value":"not-an-ip"}],"deleted":null}`,
		`null`,
		`{"new":null,"deleted":null}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1))
		if r.Header.Get("X-Api-Key") != "k" || r.Header.Get("User-Agent") != crowdsec.UserAgent || r.URL.Path != "/v1/decisions/stream" ||
			(r.URL.Query().Get("startup") == "true") != (n == 1) {
			t.Errorf("request %d: %s %s, key %q, agent %q", n, r.Method, r.URL, r.Header.Get("X-Api-Key"), r.Header.Get("User-Agent"))
		}
		w.Write([]byte(bodies[min(n, len(bodies))-1]))
	}))
	t.Cleanup(srv.Close)
	clock := testclock.New()
	b, err := crowdsec.New(crowdsec.Options{URL: srv.URL + "/", Key: "k", Clock: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	p := newProtector(t, b)
	poll(t, b)
	for addr, want := range map[string]protect.Status{
		"192.0.2.1": protect.Blocked, "192.0.2.3": protect.Allowed, "2001:db8::5": protect.Blocked, "192.0.2.5": protect.Allowed,
	} {
		if got := status(t, p, addr); got != want {
			t.Errorf("VerifyAddr(%s) = %v, want %v", addr, got, want)
		}
	}
	clock.Advance(3 * time.Second)
	poll(t, b) // a null body
	if s := status(t, p, "192.0.2.1"); s != protect.Allowed {
		t.Errorf("VerifyAddr(192.0.2.1) after its 2s ran out = %v, want allowed", s)
	}
	poll(t, b)
	if got := b.BlockSet().Len(); got != 1 {
		t.Errorf("BlockSet().Len() = %d, want 1", got)
	}
	if st := b.BlockSourceStatus(); !st.Up || !st.Checked.Equal(clock.Now()) {
		t.Errorf("BlockSourceStatus() = %+v, want up, checked now", st)
	}
}

// With SkipPushed, the decisions a protect Machine pushed (scenario
// protect/...) are left out, and every other kept; without it, kept.
func TestBouncerSkipPushed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"new":[{"id":1,"duration":"1h","scope":"Ip","type":"ban","value":"192.0.2.1","scenario":"protect/credential stuffing"},
			{"id":2,"duration":"1h","scope":"Ip","type":"ban","value":"192.0.2.2","scenario":"crowdsecurity/ssh-bf"},
			{"id":3,"duration":"1h","scope":"Ip","type":"ban","value":"192.0.2.3","scenario":"protectorate/x"}],"deleted":null}`))
	}))
	t.Cleanup(srv.Close)
	for _, skip := range []bool{false, true} {
		b, err := crowdsec.New(crowdsec.Options{URL: srv.URL, Key: "k", SkipPushed: skip, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		p := newProtector(t, b)
		poll(t, b)
		want := map[string]protect.Status{"192.0.2.1": protect.Blocked, "192.0.2.2": protect.Blocked, "192.0.2.3": protect.Blocked}
		if skip {
			want["192.0.2.1"] = protect.Allowed
		}
		for addr, w := range want {
			if got := status(t, p, addr); got != w {
				t.Errorf("SkipPushed %v: VerifyAddr(%s) = %v, want %v", skip, addr, got, w)
			}
		}
	}
}

// A set too wide is refused alone: captcha decisions covering every
// IPv4 address (an operator's "challenge everyone") leave the bans going
// on, and count one error.
func TestBouncerWideChallengeKeepsBans(t *testing.T) {
	var calls atomic.Int32
	bodies := []string{
		`{"new":[{"id":1,"duration":"1h","scope":"Ip","type":"ban","value":"192.0.2.1"}],"deleted":null}`,
		`{"new":[{"id":2,"duration":"1h","scope":"Range","type":"captcha","value":"0.0.0.0/1"},
			{"id":4,"duration":"1h","scope":"Range","type":"captcha","value":"128.0.0.0/1"},
			{"id":3,"duration":"1h","scope":"Ip","type":"ban","value":"192.0.2.2"}],"deleted":null}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(bodies[min(int(calls.Add(1)), len(bodies))-1]))
	}))
	t.Cleanup(srv.Close)
	b, err := crowdsec.New(crowdsec.Options{URL: srv.URL, Key: "k", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	p := newProtector(t, b)
	poll(t, b)
	poll(t, b)
	for addr, want := range map[string]protect.Status{"192.0.2.1": protect.Blocked, "192.0.2.2": protect.Blocked, "198.51.100.1": protect.Allowed} {
		if got := status(t, p, addr); got != want {
			t.Errorf("VerifyAddr(%s) beside too wide a captcha set = %v, want %v", addr, got, want)
		}
	}
	if got := b.ChallengeList().Source.(protect.BlockSource).BlockSet().Len(); got != 0 {
		t.Errorf("the captcha set's Len() = %d, want 0: the wide one refused", got)
	}
	if got := b.BlockSourceStatus().Errors; got != 1 {
		t.Errorf("BlockSourceStatus().Errors = %d, want 1", got)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		opts crowdsec.Options
		want string
	}{
		{crowdsec.Options{URL: "http://127.0.0.1:8080"}, "URL and Key are both required"},
		{crowdsec.Options{URL: "127.0.0.1:8080", Key: "k"}, `URL "127.0.0.1:8080"`},
		{crowdsec.Options{URL: "http://u:secret@127.0.0.1:8080", Key: "k"}, "the key goes in Key"},
		{crowdsec.Options{URL: "http://127.0.0.1:8080", Key: "k", Interval: time.Millisecond}, "Interval 1ms: want at least 1s"},
		{crowdsec.Options{URL: "http://127.0.0.1:8080", Key: "k", Types: []string{"ban", "captcha"}, ChallengeTypes: []string{"Captcha"}}, `type "Captcha" is in both Types and ChallengeTypes`},
	}
	for _, tt := range tests {
		_, err := crowdsec.New(tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("New(%+v) = %v, want an error with %q", tt.opts, err, tt.want)
		}
	}
}

// Run drops ended decisions without rebuilding the set for each one: a
// set whose decisions end a few tens of milliseconds apart is made again
// a few times, not once a decision, and every decision still leaves it
// soon after its end. No poll runs in between (the interval is a minute),
// so every set after the first is Run's.
func TestBouncerRunCoalescesEnds(t *testing.T) {
	const n = 20
	var body strings.Builder
	body.WriteString(`{"new":[`)
	for i := range n {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"id":%d,"duration":"%dms","scope":"Ip","type":"ban","value":"192.0.2.%d"}`, i+1, 300+30*i, i+1)
	}
	body.WriteString(`],"deleted":null}`)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Write([]byte(body.String()))
			return
		}
		w.Write([]byte(`{"new":null,"deleted":null}`))
	}))
	t.Cleanup(srv.Close)
	b, err := crowdsec.New(crowdsec.Options{URL: srv.URL + "/", Key: "k", Interval: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	run(t, b)
	sets := map[*protect.BlockSet]bool{}
	var empty time.Duration
	for time.Since(start) < 5*time.Second {
		s := b.BlockSet()
		if s != nil {
			sets[s] = true
			if s.Len() == 0 {
				empty = time.Since(start)
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	if empty == 0 {
		t.Fatalf("BlockSet().Len() after 5s = %d, want 0: every decision ended", b.BlockSet().Len())
	}
	// The last decision ends a little under a second after the poll:
	// allow Run's gap and a loaded machine's delay.
	if empty > 2*time.Second {
		t.Errorf("time until BlockSet().Len() = 0: got %v, want at most 2s", empty)
	}
	// The poll's set, then at most one rebuild per gap over the time the
	// ends span, and the last.
	if got := len(sets); got > 4 {
		t.Errorf("sets seen while %d decisions ended = %d, want at most 4 (Run rebuilt the set for each end)", n, got)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("LAPI calls = %d, want 1 (the startup poll alone)", got)
	}
}
