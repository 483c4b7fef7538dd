package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestExplainStoreError(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6399}
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	reset := &net.OpError{Op: "read", Net: "tcp", Addr: addr, Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}
	dns := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "redis.internal", IsNotFound: true}}
	for _, tc := range []struct {
		name string
		err  error
		want string
		is   error
	}{
		{"refused", fmt.Errorf("protect: redis range bans: %w", refused), "protect: redis range bans: connection refused at 127.0.0.1:6399", syscall.ECONNREFUSED},
		{"deadline", fmt.Errorf("protect: redis take 203.0.113.7: %w", context.DeadlineExceeded), "protect: redis take 203.0.113.7: timed out after 100ms (StoreTimeout)", context.DeadlineExceeded},
		{"reset", fmt.Errorf("protect: redis take 203.0.113.7: %w", reset), "protect: redis take 203.0.113.7: connection to 127.0.0.1:6399 lost", syscall.ECONNRESET},
		{"dns", fmt.Errorf("protect: redis ban x: %w", dns), `protect: redis ban x: cannot resolve host "redis.internal"`, nil},
		{"other", errors.New("protect: redis take x: NOSCRIPT"), "protect: redis take x: NOSCRIPT", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ExplainError(tc.err, 100*time.Millisecond)
			if got.Error() != tc.want || !errors.Is(got, tc.err) || (tc.is != nil && !errors.Is(got, tc.is)) {
				t.Fatalf("ExplainError(%q, 100ms) = %q\nwant %q, wrapping the original", tc.err, got, tc.want)
			}
		})
	}
}

// go-redis's logger is process-wide: a library that sets it takes the
// choice from every program that imports it.
func TestLibraryNeverSetsTheRedisLogger(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "SetLogger(") {
			t.Errorf("%s contains a SetLogger call, want none", f)
		}
	}
}
