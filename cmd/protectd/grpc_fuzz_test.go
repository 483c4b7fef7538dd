package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

func fuzzVerifier(f *testing.F) *verifier {
	f.Helper()
	s, err := loadSettings([]string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=3", grpcPlans})
	if err != nil {
		f.Fatal(err)
	}
	v, err := newVerifier(s, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { v.p.Close() })
	return v
}

// FuzzShouldRateLimit: whatever a descriptor holds, the answer is one
// status for it, never an error, and header names Envoy can add.
func FuzzShouldRateLimit(f *testing.F) {
	f.Add(entryAddress, "203.0.113.7", "", "", uint32(0))
	f.Add(entryConsumer, "acme", entryPlan, "pro", uint32(4))
	f.Add(entryConsumer, "acme", entryPlan, "gold", uint32(1))
	f.Add(entryAddress, "fe80::1%eth0", "generic_key", "x", uint32(1<<31))
	f.Add(entryConsumer, "", entryAddress, "::", uint32(1))
	svc := newRateLimitService(fuzzVerifier(f))
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string, hits uint32) {
		desc := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: k1, Value: v1}, {Key: k2, Value: v2}}}
		resp, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{desc}, HitsAddend: hits})
		if err != nil || len(resp.Statuses) != 1 {
			t.Fatalf("ShouldRateLimit(%q=%q, %q=%q, hits %d) = %v, %v, want one status", k1, v1, k2, v2, hits, resp, err)
		}
		for _, h := range resp.ResponseHeadersToAdd {
			if h.Key != strings.ToLower(h.Key) || h.Key == "" {
				t.Fatalf("ShouldRateLimit(%q=%q, %q=%q) header %q, want a lower-case name", k1, v1, k2, v2, h.Key)
			}
		}
	})
}

// FuzzCheck: whatever the source address and X-Forwarded-For, Check
// answers OK or denied, never an error, and a denial has a body.
func FuzzCheck(f *testing.F) {
	f.Add("203.0.113.9", "6.6.6.6")
	f.Add("127.0.0.1", "6.6.6.6, 198.51.100.7")
	f.Add("127.0.0.1", "garbage")
	f.Add("", "")
	f.Add("::ffff:127.0.0.1", "[2001:db8::1]:443")
	svc := &authzService{v: fuzzVerifier(f)}
	f.Fuzz(func(t *testing.T, source, xff string) {
		resp, err := svc.Check(context.Background(), checkRequest(source, 1234, "x-forwarded-for", xff))
		if err != nil {
			t.Fatalf("Check(source %q, XFF %q) = %v, want an answer", source, xff, err)
		}
		ok, denied := resp.GetOkResponse(), resp.GetDeniedResponse()
		if (ok == nil) == (denied == nil) || denied != nil && (denied.Body == "" || resp.Status.Code == 0) {
			t.Fatalf("Check(source %q, XFF %q) = %v, want ok_response or denied_response with a body", source, xff, resp)
		}
	})
}
