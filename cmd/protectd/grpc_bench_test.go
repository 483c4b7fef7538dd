package main

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// BenchmarkGRPCShouldRateLimit is ShouldRateLimit of one remote_address
// descriptor over a real loopback listener and one client connection (as
// an Envoy worker holds one), with 32 calls in flight, on the memory
// store. It reports the latency percentiles a caller sees: Envoy's filter
// gives the call 20ms by default.
//
//	go test ./cmd/protectd -run '^$' -bench GRPCShouldRateLimit -benchtime 20000x
func BenchmarkGRPCShouldRateLimit(b *testing.B) {
	const inFlight = 32
	s, err := loadSettings([]string{trusted, "HTTP_PROTECT_MAX_REQUESTS=1000000000000", "HTTP_PROTECT_BAN_LIMIT=-1"})
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	v, err := newVerifier(s, log)
	if err != nil {
		b.Fatal(err)
	}
	defer v.p.Close()
	g, err := startGRPC("127.0.0.1:0", v, log)
	if err != nil {
		b.Fatal(err)
	}
	defer g.kill()
	cc, err := grpc.NewClient(g.ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	c := rlsv3.NewRateLimitServiceClient(cc)
	reqs := make([]*rlsv3.RateLimitRequest, inFlight)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "web", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			descriptor(entryAddress, "203.0.113."+strconv.Itoa(i+1))}}
	}
	ctx := context.Background()
	if _, err := c.ShouldRateLimit(ctx, reqs[0]); err != nil { // connect
		b.Fatal(err)
	}
	lat := make([][]time.Duration, inFlight)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range inFlight {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				start := time.Now()
				resp, err := c.ShouldRateLimit(ctx, reqs[w])
				lat[w] = append(lat[w], time.Since(start))
				if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
					b.Errorf("ShouldRateLimit = %v, %v, want OK", resp, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// BenchmarkShouldRateLimitHandler is protectd's own share of a call: the
// handler alone, without gRPC's transport and encoding.
func BenchmarkShouldRateLimitHandler(b *testing.B) {
	s, err := loadSettings([]string{trusted, "HTTP_PROTECT_MAX_REQUESTS=1000000000000", "HTTP_PROTECT_BAN_LIMIT=-1"})
	if err != nil {
		b.Fatal(err)
	}
	v, err := newVerifier(s, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer v.p.Close()
	svc := newRateLimitService(v)
	req := &rlsv3.RateLimitRequest{Domain: "web", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor(entryAddress, "203.0.113.7")}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp, err := svc.ShouldRateLimit(ctx, req); err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
			b.Fatalf("ShouldRateLimit = %v, %v, want OK", resp, err)
		}
	}
}
