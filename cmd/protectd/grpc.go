package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// The gRPC listener (HTTP_PROTECT_GRPC_LISTEN) serves Envoy's two
// services: the rate limit service (grpcratelimit.go) and external
// authorization (grpcauthz.go). Like /verify it serves only proxies: a
// caller names the address to count in a descriptor, so whoever reaches
// it can spend any client's limit. Keep it on loopback, a private
// network or a unix socket.

// The bounds of the gRPC listener, which docs/envoy.md states. What a
// call holds while it runs is about its message twice (the bytes read
// and the decoded request), so the calls in flight hold at most
// grpcMaxInFlight × 2 × grpcMaxMessage, whatever the number of
// connections.
const (
	// grpcMaxMessage bounds a request: a check carries the request's
	// headers, which Envoy bounds at 60 KiB by default
	// (max_request_headers_kb) and protectd's HTTP server at
	// maxHeaderBytes, and a rate limit request a few descriptors.
	// Twice Envoy's default leaves room for the check's attributes.
	// protectd never reads a body, so Envoy need send none
	// (with_request_body). A larger message is refused with
	// ResourceExhausted before it is read.
	grpcMaxMessage = 128 << 10
	// grpcMaxStreams is how many calls one connection may have open:
	// HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS, the least RFC 9113
	// advises. Envoy opens another connection past it.
	grpcMaxStreams = 100
	// grpcMaxInFlight is how many calls all connections together may
	// have open; a call past it is refused with ResourceExhausted before
	// its message is read. At the p50 of 0.7 ms a call this is far more
	// than the 32 in flight the design is measured at.
	grpcMaxInFlight = 256
)

// inFlight admits at most cap(slots) calls at once, across every
// connection (grpc.InTapHandle): a slot is taken when a call's headers
// arrive, before its message is read, and given back when the call
// ends, which cancels its context.
type inFlight struct{ slots chan struct{} }

func newInFlight(n int) *inFlight { return &inFlight{slots: make(chan struct{}, n)} }

// tap takes a slot for the call of ctx, or refuses it at once: waiting
// would stop the connection's reader, which the calls holding the slots
// may need to finish.
func (f *inFlight) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	select {
	case f.slots <- struct{}{}:
	default:
		return nil, status.Errorf(codes.ResourceExhausted, "protectd: more than %d calls in flight", cap(f.slots))
	}
	context.AfterFunc(ctx, func() { <-f.slots })
	return ctx, nil
}

// checkGRPCListen accepts what HTTP_PROTECT_LISTEN accepts: host:port
// with a numeric port, or unix:PATH.
func checkGRPCListen(v string) error { return checkListen(v) }

// grpcService is protectd's gRPC server, once it listens.
type grpcService struct {
	srv    *grpc.Server
	ln     net.Listener
	served chan error
}

// startGRPC listens on addr (host:port or unix:PATH) and serves both
// services of v there. A stale unix socket, one nobody answers on, is
// removed first (a protectd killed with SIGKILL leaves one behind); a
// live one, or any other file, is an error.
func startGRPC(addr string, v *verifier, log *slog.Logger) (*grpcService, error) {
	ln, err := listenGRPC(addr)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", envGRPCListen, addr, err)
	}
	srv := grpc.NewServer(
		grpc.MaxRecvMsgSize(grpcMaxMessage),
		grpc.MaxConcurrentStreams(grpcMaxStreams),
		grpc.InTapHandle(newInFlight(grpcMaxInFlight).tap),
		// Envoy keeps its connection to a gRPC service open and pings it;
		// the defaults would close a connection that pings more often
		// than every 5 minutes.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)
	rlsv3.RegisterRateLimitServiceServer(srv, newRateLimitService(v))
	authv3.RegisterAuthorizationServer(srv, &authzService{v: v})
	g := &grpcService{srv: srv, ln: ln, served: make(chan error, 1)}
	go func() { g.served <- srv.Serve(ln) }()
	log.Info("grpc listening", "addr", ln.Addr().String())
	return g, nil
}

func listenGRPC(addr string) (net.Listener, error) { return listen(addr) }

// done reports the end of serving; a nil g never ends (gRPC is off).
func (g *grpcService) done() <-chan error {
	if g == nil {
		return nil
	}
	return g.served
}

// stop lets the calls in flight finish until ctx ends, then closes every
// connection. A nil g is off and stops at once.
func (g *grpcService) stop(ctx context.Context) {
	if g == nil {
		return
	}
	stopped := make(chan struct{})
	go func() { g.srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		g.srv.Stop()
		<-stopped
	}
}

// kill closes every connection at once; a nil g has none.
func (g *grpcService) kill() {
	if g != nil {
		g.srv.Stop()
	}
}
