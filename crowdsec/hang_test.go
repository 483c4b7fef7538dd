package crowdsec

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/testclock"
)

// hangingLAPI answers its first poll with one decision of the given
// duration for 192.0.2.1, and every later one with the start of an
// answer that never ends, until the test ends. in receives a value
// when such a poll is inside.
func hangingLAPI(t *testing.T, duration string) (url string, in <-chan struct{}) {
	t.Helper()
	inside := make(chan struct{}, 16)
	release := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			io.WriteString(w, `{"new":[{"id":1,"duration":"`+duration+`","scope":"Ip","type":"ban","value":"192.0.2.1"}],"deleted":null}`)
			return
		}
		io.WriteString(w, `{"new":[`)
		w.(http.Flusher).Flush()
		inside <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv.URL, inside
}

// A decision that ends while a poll waits on a LAPI that hangs mid-answer
// leaves the set at its end: expiry never waits on the poll in flight.
func TestExpiryDuringAHungPoll(t *testing.T) {
	url, inside := hangingLAPI(t, "25s")
	clock := testclock.New()
	b, err := New(Options{URL: url, Key: "k", Clock: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	banned := netip.MustParseAddr("192.0.2.1")
	if !b.BlockSet().Contains(banned) {
		t.Fatalf("BlockSet().Contains(%v) after the first poll = false, want true", banned)
	}
	ctx, cancel := context.WithCancel(t.Context())
	polled := make(chan error, 1)
	go func() { polled <- b.Poll(ctx) }()
	<-inside
	clock.Advance(26 * time.Second)
	expired := make(chan struct{})
	go func() { b.expire(); close(expired) }()
	select {
	case <-expired:
	case <-time.After(10 * time.Second): // a deadlock's guard, not a measure
		t.Fatal("expire() waited on the poll in flight")
	}
	if b.BlockSet().Contains(banned) {
		t.Errorf("BlockSet().Contains(%v) 26s into a 25s decision, a poll hung = true, want false", banned)
	}
	cancel()
	if err := <-polled; err == nil {
		t.Errorf("the hung Poll = nil error, want its cut answer's")
	}
	if b.BlockSet().Contains(banned) {
		t.Errorf("BlockSet().Contains(%v) after the hung poll failed = true, want false", banned)
	}
}

// Run ends a decision while its poll hangs, as expire does.
func TestRunEndsDecisionsDuringAHungPoll(t *testing.T) {
	url, inside := hangingLAPI(t, "3s")
	// The client waits longer than the test: only an expiry apart from
	// the poll can end the decision in time.
	client := &http.Client{Timeout: time.Minute}
	b, err := New(Options{URL: url, Key: "k", Interval: MinInterval, Client: client, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-inside // the second poll, a second after the first, hangs; the decision ends at 3s
	banned := netip.MustParseAddr("192.0.2.1")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if !b.BlockSet().Contains(banned) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("BlockSet().Contains(%v) 10s into a 3s decision, a poll hung = true, want false", banned)
		}
	}
}
