package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
	"unsafe"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/store"
)

// A probe whose caller gives up neither closes nor reopens the circuit,
// but must not keep the next probe out forever.
func TestBreakerAbandonedProbe(t *testing.T) {
	addr := "127.0.0.1:1" // nothing listens: every call fails at once
	in := newInstance(t, addr, "protect:", protect.Config{OnStoreError: protect.FailOpen, StoreTimeout: 100 * time.Millisecond}, Options{RangeRefresh: -1})
	a := netip.MustParseAddr("192.0.2.1")
	for range breakerThreshold {
		in.p.VerifyAddr(t.Context(), a)
	}
	if !in.p.Stats().CircuitOpen {
		t.Fatal("circuit not open after failures")
	}
	in.clock.Advance(breakerCooldown)
	gone, cancel := context.WithCancel(t.Context())
	cancel() // the probe's caller has already gone
	in.p.VerifyAddr(gone, a)
	in.clock.Advance(breakerCooldown)
	if d, _ := in.p.VerifyAddr(t.Context(), a); errors.Is(d.Err, protect.ErrStoreUnavailable) {
		t.Fatalf("VerifyAddr after the cooldown = %v: an abandoned probe kept the circuit shut for good", d.Err)
	}
}

// A wall clock stepped back an hour must not keep the circuit open for an
// hour: the cooldown runs on the monotonic clock. The injected clock
// behaves as time.Now does across a step, monotonic reading and all.
func TestBreakerIgnoresWallClockSteps(t *testing.T) {
	for _, store := range []string{"redis", "third-party"} {
		t.Run(store, func(t *testing.T) {
			start := time.Now()
			var mu sync.Mutex
			var elapsed, step time.Duration
			clock := func() time.Time {
				mu.Lock()
				defer mu.Unlock()
				return stepWall(t, start.Add(elapsed), step)
			}
			// Nothing listens on port 1: every call fails at once.
			rs := New(dial("127.0.0.1:1"), Options{RangeRefresh: -1, Clock: clock, Logger: discardLogger()})
			t.Cleanup(func() { rs.Close(); rs.Client().Close() })
			var s protect.Store = rs
			if store == "third-party" {
				s = opaqueStore{rs} // no circuitStore: the protector's own breaker
			}
			p, err := protect.New(protect.Config{Store: s, OnStoreError: protect.FailOpen, Clock: clock, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			a := netip.MustParseAddr("192.0.2.1")
			for range breakerThreshold {
				p.VerifyAddr(t.Context(), a)
			}
			if d, _ := p.VerifyAddr(t.Context(), a); !errors.Is(d.Err, protect.ErrStoreUnavailable) {
				t.Fatalf("circuit not open after %d failures: %v", breakerThreshold, d.Err)
			}
			mu.Lock()
			elapsed += breakerCooldown
			step = -time.Hour
			mu.Unlock()
			if d, _ := p.VerifyAddr(t.Context(), a); d.Err == nil || errors.Is(d.Err, protect.ErrStoreUnavailable) {
				t.Fatalf("a cooldown later, with the wall clock an hour back, no probe reached the store: %v", d.Err)
			}
		})
	}
}

// stepWall returns tm with its wall clock moved by d (whole seconds) and
// its monotonic reading kept: what time.Now returns once an operator or
// NTP has stepped the system clock. The time package offers no way to do
// this, so it edits the value's documented layout (wall: hasMonotonic,
// 33 bits of seconds since 1885, 30 bits of nanoseconds; ext: the
// monotonic reading), and checks the result.
func stepWall(t *testing.T, tm time.Time, d time.Duration) time.Time {
	t.Helper()
	if d == 0 {
		return tm
	}
	type layout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	out := tm
	l := (*layout)(unsafe.Pointer(&out))
	if l.wall>>63 == 0 {
		t.Fatal("stepWall needs a time with a monotonic reading")
	}
	l.wall = uint64(int64(l.wall) + int64(d/time.Second)<<30)
	if out.Sub(tm) != 0 || out.UnixNano()-tm.UnixNano() != int64(d) {
		t.Skipf("time.Time's layout is not what stepWall expects: %v %v", out.Sub(tm), out.UnixNano()-tm.UnixNano())
	}
	return out
}

// opaqueStore hides what its store implements beyond Store, as a third
// party's store would.
type opaqueStore struct{ s protect.Store }

func (o opaqueStore) Space(sc store.Scope) (store.Space, error) { return o.s.Space(sc) }
func (o opaqueStore) Close() error                              { return o.s.Close() }
func (o opaqueStore) Published(ctx context.Context, ns string) (store.Limits, bool, error) {
	return o.s.Published(ctx, ns)
}

// Every protector on one store shares its breaker: four protectors in
// front of a Redis that never answers reach it three times in all, not
// three times each.
func TestSharedBreakerAcrossProtectors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept() // and never answer
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	s, err := Dial("redis://"+ln.Addr().String(), Options{RangeRefresh: -1, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var ps []*protect.Protector
	for i := range 4 {
		p, err := protect.New(protect.Config{Store: s, Namespace: fmt.Sprintf("p%d:", i), StoreTimeout: 30 * time.Millisecond, OnStoreError: protect.FailOpen, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		ps = append(ps, p)
	}
	for i := range 12 {
		ps[i%4].VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1"))
	}
	var calls uint64
	for _, p := range ps {
		calls += p.Stats().StoreCalls
	}
	mu.Lock()
	n := len(conns)
	mu.Unlock()
	// One connection more: Dial's own round trip (INFO cluster), which
	// timed out.
	if calls != breakerThreshold || n != breakerThreshold+1 {
		t.Fatalf("4 protectors, 12 requests: store calls = %d, connections = %d; want %d and %d", calls, n, breakerThreshold, breakerThreshold+1)
	}
}
