package webhook

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/follow"
)

var secret = []byte("0123456789abcdef-test")

// receiver is a webhook endpoint on loopback: it checks each post's
// signature and answers with the next of statuses (200 once they run
// out), after hold lets it.
type receiver struct {
	t        *testing.T
	mu       sync.Mutex
	statuses []int
	posts    [][]string // the keys of each post taken (2xx)
	got      chan struct{}
	hold     chan struct{}    // nil: answer at once
	held     chan struct{}    // signalled when a post waits for hold
	down     func() bool      // nil: up; true: answer 503
	now      func() time.Time // the clock posts are verified by
	stamps   []string         // the X-Protect-Timestamp of every post
	url      string
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{t: t, statuses: statuses, got: make(chan struct{}, 100)}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/hook"
	return r
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	ts, sig := req.Header.Get(TimestampHeader), req.Header.Get(SignatureHeader)
	if !Verify(secret, ts, body, sig, r.now()) {
		r.t.Errorf("post %s = %q, %s = %q at %v, want the body's signature %q", TimestampHeader, ts, SignatureHeader, sig, r.now(), Sign(secret, ts, body))
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/json" {
		r.t.Errorf("post Content-Type = %q, want application/json", ct)
	}
	var b struct{ Events []admin.EventRecord }
	if err := json.Unmarshal(body, &b); err != nil {
		r.t.Errorf("post body %q: %v", body, err)
	}
	if r.hold != nil {
		select {
		case r.held <- struct{}{}:
		default: // someone has been told already
		}
		<-r.hold
	}
	r.mu.Lock()
	r.stamps = append(r.stamps, ts)
	status := http.StatusOK
	if r.down != nil && r.down() {
		status = http.StatusServiceUnavailable
	} else if len(r.statuses) > 0 {
		status, r.statuses = r.statuses[0], r.statuses[1:]
	}
	if status/100 == 2 {
		var keys []string
		for _, e := range b.Events {
			keys = append(keys, e.Kind+" "+e.Key)
		}
		r.posts = append(r.posts, keys)
	}
	r.mu.Unlock()
	w.WriteHeader(status)
	select {
	case r.got <- struct{}{}:
	default: // a test that does not count posts
	}
}

func (r *receiver) timestamps() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.stamps)
}

func (r *receiver) taken() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.posts)
}

// backoffs records the backoffs a Sender waited, without sleeping them,
// and is the Sender's clock: each backoff moves it on.
type backoffs struct {
	mu    sync.Mutex
	waits []time.Duration
	clock time.Time
}

// start is the time a test's Sender starts at.
var start = time.Unix(1_700_000_000, 0)

func (b *backoffs) add(d time.Duration) {
	b.mu.Lock()
	b.waits = append(b.waits, d)
	b.clock = b.clock.Add(d)
	b.mu.Unlock()
}

func (b *backoffs) now() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.clock
}

func (b *backoffs) list() []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.waits)
}

func (b *backoffs) total() (sum time.Duration) {
	for _, d := range b.list() {
		sum += d
	}
	return sum
}

// run starts a Sender of o on p's journal, posting to rcv; the test's
// end stops it.
func run(t *testing.T, p *protect.Protector, rcv *receiver, o Options) (*Sender, *backoffs) {
	t.Helper()
	b := &backoffs{clock: start}
	o.URL, o.Now, rcv.now = rcv.url, b.now, b.now
	o.Secret, o.Poll = secret, time.Millisecond
	o.Wait = func(ctx context.Context, d time.Duration) bool {
		if d != o.Poll {
			b.add(d)
		}
		return follow.Wait(ctx, time.Millisecond) // the backoff is recorded, not slept
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, err := s.Start(ctx, admin.New(p))
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	t.Cleanup(func() { cancel(); <-done })
	return s, b
}

func newProtector(t *testing.T) *protect.Protector {
	t.Helper()
	p, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func ban(t *testing.T, p *protect.Protector, targets ...string) {
	t.Helper()
	for _, target := range targets {
		if _, err := p.Ban(t.Context(), target, protect.BanOptions{}); err != nil {
			t.Fatalf("Ban(%q) = %v", target, err)
		}
	}
}

// A Sender posts what happens after it starts, signed, and not the
// journal's history; a failed post is retried with a doubling backoff,
// a refused one dropped.
func TestSender(t *testing.T) {
	tests := []struct {
		name      string
		statuses  []int
		want      Stats
		calls     int // posts the receiver answers
		backoffs  []time.Duration
		stamps    []string // each post's X-Protect-Timestamp: each try signed anew
		delivered bool
	}{
		{"ok", nil, Stats{Delivered: 1}, 1, nil, []string{"1700000000"}, true},
		{"retried", []int{503, 429, 502}, Stats{Delivered: 1, Retries: 3}, 4, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second},
			[]string{"1700000000", "1700000001", "1700000003", "1700000006"}, true},
		{"refused", []int{400}, Stats{Refused: 1}, 1, nil, []string{"1700000000"}, false},
		{"redirected", []int{http.StatusFound}, Stats{Refused: 1}, 1, nil, []string{"1700000000"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProtector(t)
			ban(t, p, "198.51.100.1") // history: not posted
			rcv := newReceiver(t, tt.statuses...)
			s, waits := run(t, p, rcv, Options{MaxBackoff: 3 * time.Second})
			ban(t, p, "198.51.100.2")
			for range tt.calls {
				<-rcv.got
			}
			if st := settled(s, 1); st != tt.want {
				t.Errorf("Stats() = %+v, want %+v", st, tt.want)
			}
			var want [][]string
			if tt.delivered {
				want = [][]string{{"ban 198.51.100.2"}}
			}
			if got := rcv.taken(); !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("posts taken = %q, want %q", got, want)
			}
			if got := waits.list(); !slices.Equal(got, tt.backoffs) {
				t.Errorf("backoffs = %v, want %v", got, tt.backoffs)
			}
			if got := rcv.timestamps(); !slices.Equal(got, tt.stamps) {
				t.Errorf("posts' %s = %q, want %q", TimestampHeader, got, tt.stamps)
			}
		})
	}
}

// While the receiver is down for ten seconds (of the Sender's backoffs),
// events go on being read; once it is up they arrive in order, each
// exactly once.
func TestSenderReceiverDown(t *testing.T) {
	p := newProtector(t)
	rcv := newReceiver(t)
	var waits *backoffs
	rcv.down = func() bool { return waits.total() < 10*time.Second }
	var s *Sender
	s, waits = run(t, p, rcv, Options{MinBackoff: time.Second, MaxBackoff: 4 * time.Second, Batch: 2})
	targets := []string{"198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4", "198.51.100.5"}
	ban(t, p, targets...)
	st := settled(s, uint64(len(targets)))
	var got []string
	for _, post := range rcv.taken() {
		got = append(got, post...)
	}
	var want []string
	for _, target := range targets {
		want = append(want, "ban "+target)
	}
	if !slices.Equal(got, want) {
		t.Errorf("events taken = %q, want %q", got, want)
	}
	if total := waits.total(); total < 10*time.Second {
		t.Errorf("backoffs waited %v, want at least 10s", total)
	}
	if st.Delivered != uint64(len(targets)) || st.Dropped != 0 || st.Refused != 0 {
		t.Errorf("Stats() = %+v, want %d delivered, none dropped or refused", st, len(targets))
	}
}

// settled returns s's Stats once n events are delivered or refused: the
// receiver answers before the Sender counts its answer.
func settled(s *Sender, n uint64) Stats {
	for {
		st := s.Stats()
		if st.Delivered+st.Refused >= n {
			return st
		}
		follow.Wait(context.Background(), time.Millisecond)
	}
}

// While the receiver is stuck, the queue holds at most Options.Queue
// events: the oldest beyond it are dropped and counted, and the newest
// delivered once it answers.
func TestSenderQueueBound(t *testing.T) {
	p := newProtector(t)
	rcv := newReceiver(t)
	rcv.hold, rcv.held = make(chan struct{}), make(chan struct{}, 1)
	s, _ := run(t, p, rcv, Options{Queue: 2, Batch: 1})
	ban(t, p, "198.51.100.1")
	<-rcv.held // the first post is out of the queue and stuck
	ban(t, p, "198.51.100.2", "198.51.100.3", "198.51.100.4", "198.51.100.5")
	for s.Stats().Dropped < 2 { // two dropped: all four read
		follow.Wait(t.Context(), time.Millisecond)
	}
	close(rcv.hold)
	for range 3 {
		<-rcv.got
	}
	want := [][]string{{"ban 198.51.100.1"}, {"ban 198.51.100.4"}, {"ban 198.51.100.5"}}
	if got := rcv.taken(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("posts taken = %q, want %q", got, want)
	}
	if st := settled(s, 3); st.Dropped != 2 || st.Delivered != 3 {
		t.Fatalf("Stats() = %+v, want 2 dropped, 3 delivered", st)
	}
}

func TestNewRefuses(t *testing.T) {
	for _, o := range []Options{
		{URL: "ftp://host/x", Secret: secret},
		{URL: "http://", Secret: secret},
		{URL: "http://host/x", Secret: []byte("short")},
		{URL: "ftp://user:hunter2@host/x", Secret: secret},
		{URL: "http://user:hunter 2@host/x", Secret: secret},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%q, %d-byte secret) = nil error, want one", o.URL, len(o.Secret))
		} else if strings.Contains(err.Error(), string(o.Secret)) || strings.Contains(err.Error(), "hunter") {
			t.Errorf("New error %q quotes the secret or the URL's password", err)
		}
	}
}

func TestSign(t *testing.T) {
	// RFC 4231's test case 2 (key "Jefe"), its data after a timestamp and
	// a dot; the answer is openssl's:
	// printf '%s' "1700000000.what do ya want for nothing?" | openssl dgst -sha256 -hmac Jefe
	got := Sign([]byte("Jefe"), "1700000000", []byte("what do ya want for nothing?"))
	if want := "sha256=1cdd0650c8be1cb0974b1788d458b1e781206cfef59b85faafc582d2e182c57e"; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

// Verify takes a post signed for its timestamp and body within MaxSkew of
// its clock, and nothing else: a replay once the skew is past, a body or
// a timestamp changed, a timestamp that is not decimal seconds.
func TestVerify(t *testing.T) {
	body := []byte(`{"events":[]}`)
	ts := "1700000000"
	sig := Sign(secret, ts, body)
	tests := []struct {
		name string
		ts   string
		body []byte
		sig  string
		now  time.Time
		want bool
	}{
		{"as sent", ts, body, sig, start, true},
		{"MaxSkew later", ts, body, sig, start.Add(MaxSkew), true},
		{"MaxSkew earlier", ts, body, sig, start.Add(-MaxSkew), true},
		{"replayed later", ts, body, sig, start.Add(MaxSkew + time.Second), false},
		{"from the future", ts, body, sig, start.Add(-MaxSkew - time.Second), false},
		{"another body", ts, []byte(`{"events":[{}]}`), sig, start, false},
		{"another timestamp", "1700000001", body, sig, start, false},
		{"another secret", ts, body, Sign([]byte("another secret, long enough"), ts, body), start, false},
		{"no signature", ts, body, "", start, false},
		{"no timestamp", "", body, Sign(secret, "", body), start, false},
		{"signed timestamp", "+1700000000", body, Sign(secret, "+1700000000", body), start, false},
		{"fraction", "1700000000.0", body, Sign(secret, "1700000000.0", body), start, false},
		{"more digits than int64's", "99999999999999999999", body, Sign(secret, "99999999999999999999", body), start, false},
		{"beyond int64", "9999999999999999999", body, Sign(secret, "9999999999999999999", body), start, false},
		{"int64's largest", "9223372036854775807", body, Sign(secret, "9223372036854775807", body), start, false},
		{"far future", "9000000000000000000", body, Sign(secret, "9000000000000000000", body), start, false},
	}
	for _, tt := range tests {
		if got := Verify(secret, tt.ts, tt.body, tt.sig, tt.now); got != tt.want {
			t.Errorf("%s: Verify(%q, %q, %q, %v) = %v, want %v", tt.name, tt.ts, tt.body, tt.sig, tt.now, got, tt.want)
		}
	}
}
