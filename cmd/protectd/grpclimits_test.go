package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// TestGRPCOversizeMessage: a message past grpcMaxMessage is refused
// with ResourceExhausted, on both services; one just under it is
// answered.
func TestGRPCOversizeMessage(t *testing.T) {
	c := startGRPCDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1")
	ctx := context.Background()
	tests := []struct {
		name string
		size int
		want codes.Code
	}{
		{"just under", grpcMaxMessage - 4<<10, codes.OK},
		{"over", grpcMaxMessage + 1, codes.ResourceExhausted},
		{"1 MiB", 1 << 20, codes.ResourceExhausted},
	}
	for _, tt := range tests {
		big := strings.Repeat("a", tt.size)
		_, err := c.authz.Check(ctx, checkRequest("192.0.2.1", 1234, "x-big", big))
		if got := status.Code(err); got != tt.want {
			t.Errorf("%s: Check with a %d-byte header = %v (%v), want %v", tt.name, tt.size, got, err, tt.want)
		}
		_, err = c.rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "web", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("remote_address", "192.0.2.2", "generic_key", big)}})
		if got := status.Code(err); got != tt.want {
			t.Errorf("%s: ShouldRateLimit with a %d-byte descriptor = %v (%v), want %v", tt.name, tt.size, got, err, tt.want)
		}
	}
}

// TestGRPCInFlight: past its slots a call is refused with
// ResourceExhausted at once, and a call's slot is free again once it
// ends.
func TestGRPCInFlight(t *testing.T) {
	f := newInFlight(2)
	var cancels []context.CancelFunc
	for i := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		cancels = append(cancels, cancel)
		if _, err := f.tap(ctx, &tap.Info{}); err != nil {
			t.Fatalf("tap %d of 2 slots = %v, want a slot", i+1, err)
		}
	}
	_, err := f.tap(context.Background(), &tap.Info{})
	if got := status.Code(err); got != codes.ResourceExhausted {
		t.Fatalf("tap 3 of 2 slots = %v, want ResourceExhausted", err)
	}
	cancels[0]()
	until(t, "the ended call's slot is free", func() bool { return len(f.slots) == 1 })
	if _, err := f.tap(context.Background(), &tap.Info{}); err != nil {
		t.Errorf("tap after a call ended = %v, want a slot", err)
	}
}

// grpcCallBytes is what docs/envoy.md states a call in flight costs
// protectd at most, in resident memory: its message read, decoded and
// the garbage of both until the collector runs.
const grpcCallBytes = 4 * grpcMaxMessage

// TestGRPCMemory: many concurrent large calls, over many connections,
// raise a protectd process's peak resident memory by at most
// grpcMaxInFlight calls of grpcCallBytes: calls of 1 MiB are refused
// before they are read, and calls just under the limit past
// grpcMaxInFlight are refused before theirs is.
func TestGRPCMemory(t *testing.T) {
	ch := startChild(t, []string{"grpc listening"}, envGRPCListen+"=127.0.0.1:0", "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1")
	addr := ch.addrs["grpc listening"]
	const conns = 16
	clients := make([]*grpcClients, conns)
	for i := range clients {
		clients[i] = dialGRPC(t, addr)
	}
	ctx := context.Background()
	if _, err := clients[0].authz.Check(ctx, checkRequest("192.0.2.1", 1234)); err != nil {
		t.Fatal(err)
	}
	before := ch.peakRSS(t)
	tests := []struct {
		calls, size int
	}{
		{400, 1 << 20},
		{1024, grpcMaxMessage - 4<<10},
	}
	for _, tt := range tests {
		big := strings.Repeat("a", tt.size)
		req := checkRequest("192.0.2.1", 1234, "x-big", big)
		var wg sync.WaitGroup
		var mu sync.Mutex
		codesSeen := map[codes.Code]int{}
		for i := range tt.calls {
			wg.Go(func() {
				_, err := clients[i%conns].authz.Check(ctx, req)
				mu.Lock()
				codesSeen[status.Code(err)]++
				mu.Unlock()
			})
		}
		wg.Wait()
		t.Logf("%d calls of %d bytes over %d connections: %v", tt.calls, tt.size, conns, codesSeen)
		if n := codesSeen[codes.OK] + codesSeen[codes.ResourceExhausted]; n != tt.calls {
			t.Errorf("%d calls of %d bytes: %v, want only OK and ResourceExhausted", tt.calls, tt.size, codesSeen)
		}
	}
	grew := ch.peakRSS(t) - before
	limit := int64(grpcMaxInFlight * grpcCallBytes)
	t.Logf("peak RSS of protectd grew %d bytes (bound %d)", grew, limit)
	if grew > limit {
		t.Errorf("peak RSS of protectd under concurrent large calls grew %d bytes, want at most %d (%d calls of %d)",
			grew, limit, grpcMaxInFlight, grpcCallBytes)
	}
}
