package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/heaptest"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/internal/testclock"
	"github.com/httpprotect/protect/redisstore"
)

// The bounds docs/firewall.md states for answers in flight: the shared
// snapshot holds at most lapiEntryBytes a decision, and each answer
// lapiAnswerBytes besides.
const (
	lapiEntryBytes  = 96
	lapiAnswerBytes = 128 << 10
)

// fill bans n addresses from 10.0.0.0 on p, for an hour.
func fill(t *testing.T, p *protect.Protector, n int) {
	t.Helper()
	a := netip.MustParseAddr("10.0.0.0")
	for range n {
		if _, err := p.Ban(context.Background(), a.String(), protect.BanOptions{For: time.Hour, Reason: "load"}); err != nil {
			t.Fatal(err)
		}
		a = a.Next()
	}
}

// gatedLister holds the first listing until open is closed.
type gatedLister struct {
	src interface {
		Bans(context.Context, admin.Filter) ([]protect.Ban, error)
	}
	open  chan struct{}
	mu    sync.Mutex
	calls int
}

func (g *gatedLister) Bans(ctx context.Context, f admin.Filter) ([]protect.Ban, error) {
	g.mu.Lock()
	g.calls++
	g.mu.Unlock()
	<-g.open
	return g.src.Bans(ctx, f)
}

// tinyReader dials addr with a receive buffer of a few kilobytes, so
// that what a server writes to it and it does not read stays in the
// server.
func tinyReader(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// until waits for cond, which the server's goroutines make true; it
// asserts nothing of time.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}

// TestLAPIStartupMemory: bouncers asking startup=true at once over many
// bans share one listing, and while their answers are in flight (none
// of them reads) the heap holds the snapshot and a buffer each, within
// the bounds docs/firewall.md states; then each is cut as its bouncer
// goes, and none is recorded as given.
func TestLAPIStartupMemory(t *testing.T) {
	const bans, bouncers = 100_000, 16
	for _, store := range []string{"memory", "redis-server"} {
		t.Run(store, func(t *testing.T) {
			clock := testclock.New()
			cfg := protect.Config{Clock: clock.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if store == "redis-server" {
				addr := redistest.Start(t).Addr // its own: see TestLAPIManyBouncers
				rc := redistest.Dial(addr)
				s := redisstore.New(rc, redisstore.Options{Clock: clock.Now, Logger: cfg.Logger, RangeRefresh: -1})
				t.Cleanup(func() { s.Close(); rc.Close() })
				cfg.Store, cfg.Namespace, cfg.StoreTimeout = s, redistest.NamespaceAt(t, addr), 10*time.Second
			}
			p, err := protect.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			fill(t, p, bans)
			gate := &gatedLister{src: admin.New(p), open: make(chan struct{})}
			var log bytes.Buffer
			r := &lapiRig{p: p, clock: clock, h: newLAPI(gate, nil, nil, []string{keyA}, clock.Now, slog.New(slog.NewTextHandler(&log, nil)))}
			srv, closed := r.serve(t)
			before := heaptest.Live()

			var conns []net.Conn
			for range bouncers {
				c := tinyReader(t, srv.Listener.Addr().String())
				fmt.Fprintf(c, "GET /v1/decisions/stream?startup=true HTTP/1.1\r\nHost: protectd\r\nX-Api-Key: %s\r\n\r\n", keyA)
				conns = append(conns, c)
			}
			until(t, "every bouncer waits for the first one's listing", func() bool { return r.h.joined.Load() == bouncers-1 })
			close(gate.open)
			until(t, "every answer is under way", func() bool { return r.h.writing.Load() == bouncers })
			grew := int64(heaptest.Live()) - int64(before)
			if limit := int64(bans*lapiEntryBytes + bouncers*lapiAnswerBytes); grew > limit {
				t.Errorf("heap with %d startup answers of %d bans in flight grew %d bytes, want at most %d (%d a decision, %d an answer)",
					bouncers, bans, grew, limit, lapiEntryBytes, lapiAnswerBytes)
			}
			t.Logf("heap with %d startup answers of %d bans in flight: +%d bytes", bouncers, bans, grew)
			gate.mu.Lock()
			calls := gate.calls
			gate.mu.Unlock()
			if calls != 1 {
				t.Errorf("%d bouncers asking at once listed the bans %d times, want 1", bouncers, calls)
			}

			for _, c := range conns {
				c.Close()
			}
			for range bouncers {
				waitClosed(t, closed)
			}
			until(t, "every answer has ended", func() bool { return r.h.writing.Load() == 0 })
			if n := r.h.cut.Load(); n != bouncers {
				t.Errorf("answers cut = %d, want %d", n, bouncers)
			}
			if n := strings.Count(log.String(), `msg="crowdsec local api: answer cut"`); n != bouncers {
				t.Errorf("log has %d answer cut lines, want %d:\n%s", n, bouncers, log.String())
			}
			// Nothing was given: the next pull is a first one, every ban new.
			client := srv.Client()
			body := pull(t, client, srv, "/v1/decisions/stream", keyA)
			if n := strings.Count(body, `"id":`); !strings.HasPrefix(body, `200 {"deleted":null,"new":[`) || n != bans {
				t.Errorf("pull after the cut answers = %.60s… with %d decisions, want 200 and %d new", body, n, bans)
			}
		})
	}
}

// TestLAPICutsReaderThatDoesNotRead: a bouncer that asks and does not
// read is cut once a write has waited stall, having been sent less than
// its answer, and is not recorded as given.
func TestLAPICutsReaderThatDoesNotRead(t *testing.T) {
	const bans = 100_000
	r := newLAPIRig(t)
	fill(t, r.p, bans)
	var log bytes.Buffer
	r.h = lapiOf(r.p, nil, []string{keyA}, r.clock.Now, slog.New(slog.NewTextHandler(&log, nil)))
	r.h.opt.stall = time.Second // long enough that the pull after it, which reads, is never cut on a busy machine
	srv, closed := r.serve(t)
	c := tinyReader(t, srv.Listener.Addr().String())
	fmt.Fprintf(c, "GET /v1/decisions/stream?startup=true HTTP/1.1\r\nHost: protectd\r\nX-Api-Key: %s\r\n\r\n", keyA)
	waitClosed(t, closed)
	if n := r.h.cut.Load(); n != 1 {
		t.Errorf("answers cut = %d, want 1", n)
	}
	if n := strings.Count(log.String(), `msg="crowdsec local api: answer cut"`); n != 1 {
		t.Errorf("log has %d answer cut lines, want 1:\n%s", n, log.String())
	}
	got, _ := io.Copy(io.Discard, c)
	full := pull(t, srv.Client(), srv, "/v1/decisions/stream", keyA)
	if n := strings.Count(full, `"id":`); n != bans {
		t.Errorf("pull after the cut answer has %d decisions, want all %d new", n, bans)
	}
	if got >= int64(len(full)) {
		t.Errorf("the reader that did not read got %d bytes, want fewer than the answer's %d", got, len(full))
	}
}
