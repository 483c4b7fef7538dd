package protect_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpprotect/protect"
)

// A trickler is a list server that, once slow is set, sends its answer
// one newline at a time until release is closed, as a server at 1 byte/s
// does, then the list.
type trickler struct {
	srv     *httptest.Server
	gets    atomic.Int32
	slow    atomic.Bool
	body    atomic.Value // string
	started chan struct{}
	release chan struct{}
}

func newTrickler(t *testing.T, body string) *trickler {
	t.Helper()
	tr := &trickler{started: make(chan struct{}, 16), release: make(chan struct{})}
	tr.body.Store(body)
	tr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.gets.Add(1)
		if tr.slow.Load() {
			tr.started <- struct{}{}
			w.WriteHeader(http.StatusOK)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
		trickle:
			for {
				w.Write([]byte("\n"))
				w.(http.Flusher).Flush()
				select {
				case <-tr.release:
					break trickle
				case <-r.Context().Done():
					return
				case <-tick.C:
				}
			}
		}
		w.Write([]byte(tr.body.Load().(string)))
	}))
	t.Cleanup(func() {
		select {
		case <-tr.release:
		default:
			close(tr.release)
		}
		tr.srv.Close()
	})
	return tr
}

// loads is a slog.Handler that passes on the name of each list loaded.
type loads chan string

func (l loads) Enabled(context.Context, slog.Level) bool { return true }
func (l loads) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l loads) WithGroup(string) slog.Handler            { return l }
func (l loads) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "protect: block list loaded" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "list" {
				select {
				case l <- a.Value.String():
				default:
				}
			}
			return true
		})
	}
	return nil
}

// waitLoad waits for a load of list, or fails after 10s.
func waitLoad(t *testing.T, l loads, list string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-l:
			if got == list {
				return
			}
		case <-timeout:
			t.Fatalf("no load of %s within 10s", list)
		}
	}
}

// ReloadBlockLists checks the lists side by side: while one list's
// server trickles its answer, the other list is fetched and in force.
// Calls made while a list's check runs share one more check of it: six
// calls during a slow fetch cost that list exactly one more GET.
func TestReloadBlockListsSideBySide(t *testing.T) {
	slow, fast := newTrickler(t, "192.0.2.1\n"), newTrickler(t, "198.51.100.1\n")
	l := make(loads, 64)
	p, err := protect.New(protect.Config{Logger: slog.New(l), BlockLists: []protect.BlockList{
		{Name: "slow", URL: slow.srv.URL + "/a.txt", MinShare: -1},
		{Name: "fast", URL: fast.srv.URL + "/b.txt", MinShare: -1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.ReloadBlockLists(t.Context()); err != nil {
		t.Fatal(err)
	}
	blocked := func(addr string) bool {
		d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr(addr))
		return d.Status == protect.Blocked
	}
	slowGets := slow.gets.Load()

	slow.slow.Store(true)
	slow.body.Store("192.0.2.2\n")
	fast.body.Store("203.0.113.9\n")
	for len(l) > 0 {
		<-l
	}
	first := make(chan error, 1)
	go func() { first <- p.ReloadBlockLists(context.Background()) }()
	<-slow.started
	waitLoad(t, l, "fast")
	if !blocked("203.0.113.9") || blocked("198.51.100.1") {
		t.Errorf("while the slow list trickles: 203.0.113.9 blocked %v, 198.51.100.1 blocked %v; want the fast list's new set", blocked("203.0.113.9"), blocked("198.51.100.1"))
	}
	select {
	case err := <-first:
		t.Fatalf("ReloadBlockLists returned %v while a list's server still trickles, want it to wait for the list", err)
	default:
	}

	// Five calls that give up at once share one more check of the slow
	// list, run after the slow one.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for range 5 {
		if err := p.ReloadBlockLists(gone); err == nil || !strings.Contains(err.Error(), `protect: block list "slow": context canceled`) {
			t.Errorf("ReloadBlockLists(a canceled context) = %v, want the slow list's context canceled", err)
		}
	}
	slow.slow.Store(false)
	close(slow.release)
	if err := <-first; err != nil {
		t.Errorf("the first ReloadBlockLists = %v, want nil", err)
	}
	waitLoad(t, l, "slow")
	waitLoad(t, l, "slow")
	if err := p.ReloadBlockLists(t.Context()); err != nil { // one more, after the shared one
		t.Fatal(err)
	}
	if got := slow.gets.Load() - slowGets; got != 3 {
		t.Errorf("GETs of the slow list for 7 calls, 5 of them during its slow fetch = %d, want 3", got)
	}
	if !blocked("192.0.2.2") {
		t.Errorf("192.0.2.2 after the slow fetch ended: not blocked, want blocked")
	}
}
