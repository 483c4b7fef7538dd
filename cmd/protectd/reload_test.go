package main

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/blocktest"
)

// Hangups during a reload ask for one more reload after it, however
// many they are: a reload is never queued behind another, and never run
// twice for a burst.
func TestReloadLoopCoalesces(t *testing.T) {
	for _, during := range []int{0, 1, 6} {
		hup := make(chan struct{})
		started, release := make(chan struct{}), make(chan struct{})
		var calls atomic.Int32
		reload := func(ctx context.Context) error {
			calls.Add(1)
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}
		logs := &logBuffer{}
		end := reloadLoop(t.Context(), hup, reload, slog.New(slog.NewJSONHandler(logs, nil)))
		hup <- struct{}{}
		<-started
		for range during {
			hup <- struct{}{} // taken by the loop while the reload runs
		}
		release <- struct{}{}
		want := 1
		if during > 0 {
			want = 2
			<-started
			release <- struct{}{}
		}
		end()
		if got := int(calls.Load()); got != want {
			t.Errorf("reloads for 1 hangup, then %d during it = %d, want %d", during, got, want)
		}
		if got, want := len(logs.lines(t, "SIGHUP: a reload is running; one more follows it")), min(during, 1); got != want {
			t.Errorf("%d hangups during a reload logged %d lines of one more, want %d", during, got, want)
		}
	}
}

// waitLines waits until the log holds n lines of msg, or fails after 10s.
func waitLines(t *testing.T, d *daemon, msg string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(d.log.lines(t, msg)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d lines %q after 10s, want %d; log:\n%s", len(d.log.lines(t, msg)), msg, n, d.log)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A SIGHUP while one list's server trickles its answer at a byte a tick
// reloads the other list at once; a second SIGHUP during that reload
// runs exactly one more after it.
func TestHangupSlowListServer(t *testing.T) {
	slow, fast := blocktest.NewServer(t, "192.0.2.1\n"), blocktest.NewServer(t, "198.51.100.1\n")
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1",
		"HTTP_PROTECT_BLOCKLISTS=slow="+slow.URL+"/slow.txt,fast="+fast.URL+"/fast.txt")
	waitLines(t, d, "protect: block list loaded", 2)
	if got := slow.Gets.Load(); got != 1 {
		t.Fatalf("GETs of the slow list at start = %d, want 1", got)
	}

	slow.Slow.Store(true)
	fast.SetBody("203.0.113.9\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	<-slow.Started
	eventually(t, d, "203.0.113.9", 403, "the fast list while the slow one trickles")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLines(t, d, "SIGHUP: a reload is running; one more follows it", 1)
	if n := len(d.log.lines(t, "SIGHUP: block lists checked")); n != 0 {
		t.Errorf("%d reloads ended while the slow list trickles, want 0", n)
	}
	slow.Slow.Store(false)
	slow.Release()
	waitLines(t, d, "SIGHUP: block lists checked", 2)
	if got := slow.Gets.Load(); got != 3 {
		t.Errorf("GETs of the slow list: start, 2 SIGHUPs, one during the other's reload = %d, want 3", got)
	}
}
