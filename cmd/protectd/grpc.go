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
	"google.golang.org/grpc/keepalive"
)

// The gRPC listener (HTTP_PROTECT_GRPC_LISTEN) serves Envoy's two
// services: the rate limit service (grpcratelimit.go) and external
// authorization (grpcauthz.go). Like /verify it serves only proxies: a
// caller names the address to count in a descriptor, so whoever reaches
// it can spend any client's limit. Keep it on loopback, a private
// network or a unix socket.

// grpcMaxMessage bounds a request: a check carries the request's headers,
// which protectd's HTTP server bounds at maxHeaderBytes too, and a rate
// limit request a few descriptors. Envoy sends no body unless configured
// to (with_request_body), and protectd never reads one.
const grpcMaxMessage = 1 << 20

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
