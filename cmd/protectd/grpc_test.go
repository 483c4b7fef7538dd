package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// grpcClients are the go-control-plane clients of a protectd started with
// its gRPC listener on a free loopback port.
type grpcClients struct {
	d     *daemon
	rls   rlsv3.RateLimitServiceClient
	authz authv3.AuthorizationClient
}

// startGRPCDaemon runs protectd with env and HTTP_PROTECT_GRPC_LISTEN on
// 127.0.0.1:0, and dials its gRPC listener.
func startGRPCDaemon(t *testing.T, env ...string) *grpcClients {
	t.Helper()
	d := startDaemon(t, append([]string{envGRPCListen + "=127.0.0.1:0"}, env...)...)
	l := d.log.lines(t, "grpc listening")
	if len(l) != 1 {
		t.Fatalf("log lines grpc listening = %v, want 1; log:\n%s", l, d.log)
	}
	c := dialGRPC(t, l[0]["addr"].(string))
	c.d = d
	return c
}

func dialGRPC(t *testing.T, target string) *grpcClients {
	t.Helper()
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &grpcClients{rls: rlsv3.NewRateLimitServiceClient(cc), authz: authv3.NewAuthorizationClient(cc)}
}

// descriptor is one descriptor of the given key, value pairs.
func descriptor(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func shouldRateLimit(t *testing.T, c *grpcClients, hits uint32, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := c.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "web", Descriptors: descs, HitsAddend: hits})
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v) = %v, want a response", descs, err)
	}
	return resp
}

// headersOf formats Envoy header values one a line, "name: value".
func headersOf(hs []*corev3.HeaderValue) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "%s: %s\n", h.Key, h.Value)
	}
	return b.String()
}

func optionsOf(hs []*corev3.HeaderValueOption) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "%s: %s (%s)\n", h.Header.Key, h.Header.Value, h.AppendAction)
	}
	return b.String()
}

// statusOf is a descriptor status in one line: code, limit, remaining,
// reset.
func statusOf(s *rlsv3.RateLimitResponse_DescriptorStatus) string {
	out := s.Code.String()
	if l := s.CurrentLimit; l != nil {
		out += fmt.Sprintf(" %s %d/%s", l.Name, l.RequestsPerUnit, l.Unit)
		if l.UnitMultiplier != nil {
			out += fmt.Sprintf("×%d", l.UnitMultiplier.Value)
		}
	}
	out += fmt.Sprintf(" r=%d", s.LimitRemaining)
	if s.DurationUntilReset != nil {
		// Rounded up, as Retry-After is: the clock runs between calls.
		d := s.DurationUntilReset.AsDuration()
		out += " t=" + ((d + time.Second - 1) / time.Second * time.Second).String()
	}
	return out
}

// TestGRPCShouldRateLimitExactCounts: 300 calls for one remote_address
// are exactly 100 OK, 150 OVER_LIMIT for the stream (Retry-After the
// TTL) and 50 OVER_LIMIT for the ban that the 251st wrote (Retry-After
// the ban's length).
func TestGRPCShouldRateLimitExactCounts(t *testing.T) {
	c := startGRPCDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=100", "HTTP_PROTECT_BAN_LIMIT=250", "HTTP_PROTECT_TTL=1h", "HTTP_PROTECT_BAN_DURATION=2h")
	// The exact answers of the first call, the first refused and the
	// first banned.
	exact := map[int]struct{ hdr, status string }{
		0: {"ratelimit: \"protect\";r=99;t=3600\nratelimit-policy: \"protect\";q=100;w=3600\n",
			"OK protect 100/HOUR r=99 t=1h0m0s"},
		100: {"cache-control: no-store\nratelimit: \"protect\";r=0;t=3600\nratelimit-policy: \"protect\";q=100;w=3600\nretry-after: 3600\n",
			"OVER_LIMIT protect 100/HOUR r=0 t=1h0m0s"},
		250: {"cache-control: no-store\nratelimit: \"protect\";r=0;t=7200\nratelimit-policy: \"protect\";q=100;w=3600\nretry-after: 7200\n",
			"OVER_LIMIT protect 100/HOUR r=0 t=2h0m0s"},
	}
	ok := 0
	for i := range 300 {
		resp := shouldRateLimit(t, c, 0, descriptor("generic_key", "api", entryAddress, "203.0.113.7"))
		if len(resp.Statuses) != 1 || resp.Statuses[0].Code != resp.OverallCode {
			t.Fatalf("call %d: ShouldRateLimit = %v, want one status, the overall code", i+1, resp)
		}
		if resp.OverallCode == rlsv3.RateLimitResponse_OK {
			ok++
		}
		if want, found := exact[i]; found {
			if got := headersOf(resp.ResponseHeadersToAdd); got != want.hdr {
				t.Errorf("call %d: ShouldRateLimit headers =\n%s want\n%s", i+1, got, want.hdr)
			}
			if got := statusOf(resp.Statuses[0]); got != want.status {
				t.Errorf("call %d: ShouldRateLimit status = %s, want %s", i+1, got, want.status)
			}
		}
	}
	// The log tells a limited stream from a ban.
	refused := c.d.log.lines(t, "refused")
	var limited, banned int
	for _, l := range refused {
		switch l["decision"] {
		case "limited":
			limited++
		case "banned":
			banned++
		}
	}
	if ok != 100 || limited != 150 || banned != 50 || len(refused) != 200 {
		t.Fatalf("300 ShouldRateLimit = %d OK, %d refusals logged, %d limited and %d banned, want 100, 200, 150, 50", ok, len(refused), limited, banned)
	}
}

// TestGRPCShouldRateLimitAddress: remote_address is parsed strictly; a
// value that is not an address is an unknown client, refused.
func TestGRPCShouldRateLimitAddress(t *testing.T) {
	c := startGRPCDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=5", "HTTP_PROTECT_TTL=10s")
	tests := []struct {
		addr, want string
	}{
		{"198.51.100.1", "OK protect 5/SECOND×10 r=4 t=10s"},
		{"::ffff:198.51.100.1", "OK protect 5/SECOND×10 r=3 t=10s"}, // the same client
		{"2001:db8:1:2::99", "OK protect 5/SECOND×10 r=4 t=10s"},
		{"198.51.100.1:80", "OVER_LIMIT r=0"},
		{" 198.51.100.1", "OVER_LIMIT r=0"},
		{"0.0.0.0", "OVER_LIMIT r=0"},
		{"198.051.100.1", "OVER_LIMIT r=0"},
		{"", "OVER_LIMIT r=0"},
		{"unknown", "OVER_LIMIT r=0"},
	}
	for _, tt := range tests {
		resp := shouldRateLimit(t, c, 0, descriptor(entryAddress, tt.addr))
		if got := statusOf(resp.Statuses[0]); got != tt.want {
			t.Errorf("ShouldRateLimit(remote_address %q) = %s, want %s", tt.addr, got, tt.want)
		}
	}
}

const grpcPlans = `HTTP_PROTECT_PLANS={` +
	`"pro": {"rates": [{"name": "burst", "limit": 10, "period": "1m", "burst": 10}], "quotas": [{"name": "monthly", "limit": 1000, "period": "monthly"}]},` +
	`"tiny": {"rates": [{"name": "tiny", "limit": 1, "period": "1m"}]},` +
	`"quota": {"quotas": [{"name": "monthly", "limit": 3, "period": "monthly"}]}}`

// TestGRPCShouldRateLimitConsumer: a consumer descriptor is held to its
// plan at the cost hits_addend says (the descriptor's own over the
// request's; 0 is 1), and an unknown or missing plan is never unlimited.
func TestGRPCShouldRateLimitConsumer(t *testing.T) {
	c := startGRPCDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", grpcPlans)
	acme := descriptor(entryConsumer, "acme", entryPlan, "pro")
	acme2 := descriptor(entryConsumer, "acme", entryPlan, "pro")
	acme2.HitsAddend = wrapperspb.UInt64(2)
	tests := []struct {
		hits      uint32
		desc      *ratelimitv3.RateLimitDescriptor
		want, hdr string
	}{
		{4, acme, "OK burst 10/MINUTE r=6 t=24s", ""},
		{4, acme, "OK burst 10/MINUTE r=2 t=48s", ""},
		// 4 do not fit in 2: two more tokens come in 12s; nothing charged.
		{4, acme, "OVER_LIMIT burst 10/MINUTE r=2 t=12s", "retry-after: 12\n"},
		{4, acme2, "OK burst 10/MINUTE r=0 t=1m0s", ""},
		{0, acme, "OVER_LIMIT burst 10/MINUTE r=0 t=6s", "retry-after: 6\n"},
		{1, descriptor(entryConsumer, "acme", entryPlan, "gold"), "OVER_LIMIT r=0", ""},
		{1, descriptor(entryConsumer, "acme"), "OVER_LIMIT r=0", ""},
		{1, descriptor(entryConsumer, "initech", entryPlan, "quota"), "OK monthly 3/MONTH r=2", ""},
	}
	for i, tt := range tests {
		resp := shouldRateLimit(t, c, tt.hits, tt.desc)
		got := statusOf(resp.Statuses[0])
		// t of a monthly quota depends on the date: compare up to it.
		if strings.HasPrefix(tt.want, "OK monthly") {
			got, _, _ = strings.Cut(got, " t=")
		}
		if got != tt.want {
			t.Errorf("call %d: ShouldRateLimit(hits %d, %v) = %s, want %s", i+1, tt.hits, tt.desc.Entries, got, tt.want)
		}
		if hdr := headersOf(resp.ResponseHeadersToAdd); tt.hdr != "" && !strings.Contains(hdr, tt.hdr) {
			t.Errorf("call %d: ShouldRateLimit headers =\n%s want %q", i+1, hdr, tt.hdr)
		}
	}
	if l := c.d.log.lines(t, "refused"); len(l) != 4 || l[2]["code"] != "unknown_plan" || l[2]["plan"] != "gold" || l[3]["plan_given"] != false {
		t.Fatalf("log lines refused = %v, want 4, the third and fourth unknown_plan", l)
	}
}

// TestGRPCDryRun: under DryRun every refusal, an unknown plan's too, is
// logged and answered OK.
func TestGRPCDryRun(t *testing.T) {
	c := startGRPCDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_DRY_RUN=true", "HTTP_PROTECT_MAX_REQUESTS=1", grpcPlans)
	var got []string
	for range 2 {
		resp := shouldRateLimit(t, c, 0, descriptor(entryAddress, "203.0.113.7"), descriptor(entryConsumer, "acme", entryPlan, "gold"))
		got = append(got, resp.OverallCode.String())
	}
	if want := "OK OK"; strings.Join(got, " ") != want {
		t.Fatalf("ShouldRateLimit(address past its limit, unknown plan) under DryRun = %v, want %s", got, want)
	}
	if l := c.d.log.lines(t, "refused"); len(l) != 2 || l[0]["dry_run"] != true {
		t.Fatalf("log lines refused = %v, want the two unknown plans, dry_run true", l)
	}
}

// TestGRPCShouldRateLimitOrder: one status per descriptor, in order; the
// overall code is OVER_LIMIT when any is; every descriptor's fields are
// in the headers, the longest Retry-After wins; a descriptor protectd
// cannot count is UNKNOWN and does not refuse.
func TestGRPCShouldRateLimitOrder(t *testing.T) {
	c := startGRPCDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=100", "HTTP_PROTECT_TTL=10s", grpcPlans)
	tiny := descriptor(entryConsumer, "globex", entryPlan, "tiny")
	addr := descriptor(entryAddress, "192.0.2.10")
	stray := descriptor("generic_key", "api")
	resp := shouldRateLimit(t, c, 0, addr, tiny)
	if resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("ShouldRateLimit(addr, tiny) = %v, want OK", resp.OverallCode)
	}
	resp = shouldRateLimit(t, c, 0, tiny, addr, stray)
	var got []string
	for _, s := range resp.Statuses {
		got = append(got, statusOf(s))
	}
	want := []string{"OVER_LIMIT tiny 1/MINUTE r=0 t=1m0s", "OK protect 100/SECOND×10 r=98 t=10s", "UNKNOWN r=0"}
	if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ShouldRateLimit(tiny, addr, stray) = %v %q, want OVER_LIMIT %q", resp.OverallCode, got, want)
	}
	wantHdr := "cache-control: no-store\n" +
		"ratelimit: \"tiny\";r=0;t=60\n" +
		"ratelimit: \"protect\";r=98;t=10\n" +
		"ratelimit-policy: \"tiny\";q=1;w=60\n" +
		"ratelimit-policy: \"protect\";q=100;w=10\n" +
		"retry-after: 60\n"
	if hdr := headersOf(resp.ResponseHeadersToAdd); hdr != wantHdr {
		t.Fatalf("ShouldRateLimit(tiny, addr, stray) headers =\n%s want\n%s", hdr, wantHdr)
	}
	shouldRateLimit(t, c, 0, stray)
	if l := c.d.log.lines(t, "descriptor not counted"); len(l) != 1 {
		t.Fatalf("log lines descriptor not counted = %v, want 1 for two stray descriptors", l)
	}
}

// checkRequest is an ext_authz check of a request from source with the
// given header pairs (lower case, as Envoy sends them).
func checkRequest(source string, port uint32, kv ...string) *authv3.CheckRequest {
	h := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: source, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{Method: "GET", Path: "/api/items", Headers: h}},
	}}
}

// TestGRPCCheck: the client is the source address unless it is a trusted
// proxy; allowed is ok_response with the RateLimit fields; refused is
// denied_response with the status, headers and body /verify answers
// with, exactly.
func TestGRPCCheck(t *testing.T) {
	c := startGRPCDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=1", "HTTP_PROTECT_BAN_LIMIT=-1", "HTTP_PROTECT_TTL=10s")
	ctx := context.Background()
	// An untrusted source is the client, whatever it forged.
	forged := checkRequest("203.0.113.9", 5555, "x-forwarded-for", "198.51.100.77", "x-protect-consumer", "acme", "x-protect-plan", "pro")
	resp, err := c.authz.Check(ctx, forged)
	if err != nil {
		t.Fatal(err)
	}
	ok := resp.GetOkResponse()
	wantOK := "ratelimit: \"protect\";r=0;t=10 (APPEND_IF_EXISTS_OR_ADD)\nratelimit-policy: \"protect\";q=1;w=10 (APPEND_IF_EXISTS_OR_ADD)\n"
	if resp.Status.Code != 0 || ok == nil || optionsOf(ok.ResponseHeadersToAdd) != wantOK ||
		optionsOf(ok.Headers) != "x-protect-key: 203.0.113.9 (OVERWRITE_IF_EXISTS_OR_ADD)\n" {
		t.Fatalf("Check(untrusted source) = %v, want OK, headers\n%s and x-protect-key 203.0.113.9", resp, wantOK)
	}
	resp, err = c.authz.Check(ctx, forged)
	if err != nil {
		t.Fatal(err)
	}
	denied := resp.GetDeniedResponse()
	if resp.Status.Code != int32(codes.PermissionDenied) || denied == nil || denied.Status.Code != 429 {
		t.Fatalf("second Check = %v, want PERMISSION_DENIED, denied_response 429", resp)
	}
	wantDenied := "cache-control: no-store (OVERWRITE_IF_EXISTS_OR_ADD)\n" +
		"content-type: application/problem+json (OVERWRITE_IF_EXISTS_OR_ADD)\n" +
		"ratelimit: \"protect\";r=0;t=10 (OVERWRITE_IF_EXISTS_OR_ADD)\n" +
		"ratelimit-policy: \"protect\";q=1;w=10 (OVERWRITE_IF_EXISTS_OR_ADD)\n" +
		"retry-after: 10 (OVERWRITE_IF_EXISTS_OR_ADD)\n" +
		"x-content-type-options: nosniff (OVERWRITE_IF_EXISTS_OR_ADD)\n"
	if got := optionsOf(denied.Headers); got != wantDenied {
		t.Errorf("second Check headers =\n%s want\n%s", got, wantDenied)
	}
	wantBody := `{"type":"about:blank","title":"Too Many Requests","status":429,"code":"rate_limited",` +
		`"detail":"Too many requests without a pause. Pause for retry_after seconds and the limit starts over.","retry_after":10}` + "\n"
	if denied.Body != wantBody {
		t.Errorf("second Check body = %q, want %q", denied.Body, wantBody)
	}
	// A trusted source: the client is the rightmost untrusted entry, in
	// the headers map and in header_map alike.
	// Consumer headers are never read by Check, even from a trusted
	// source: the address is counted.
	viaProxy := checkRequest("127.0.0.1", 40000, "x-forwarded-for", "6.6.6.6, 198.51.100.7", "x-protect-consumer", "acme", "x-protect-plan", "pro")
	resp, err = c.authz.Check(ctx, viaProxy)
	if err != nil {
		t.Fatal(err)
	}
	if got := optionsOf(resp.GetOkResponse().GetHeaders()); got != "x-protect-key: 198.51.100.7 (OVERWRITE_IF_EXISTS_OR_ADD)\n" {
		t.Fatalf("Check(trusted source, XFF 6.6.6.6, 198.51.100.7) = %v, want OK for 198.51.100.7", resp)
	}
	raw := checkRequest("127.0.0.1", 40000)
	raw.Attributes.Request.Http.HeaderMap = &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
		{Key: "x-forwarded-for", RawValue: []byte("6.6.6.6")}, {Key: "x-forwarded-for", RawValue: []byte("198.51.100.8")}}}
	resp, err = c.authz.Check(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if got := optionsOf(resp.GetOkResponse().GetHeaders()); got != "x-protect-key: 198.51.100.8 (OVERWRITE_IF_EXISTS_OR_ADD)\n" {
		t.Fatalf("Check(trusted source, header_map XFF 6.6.6.6 then 198.51.100.8) = %v, want OK for 198.51.100.8", resp)
	}
	// A source Envoy did not give is an unknown client.
	resp, err = c.authz.Check(ctx, &authv3.CheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetDeniedResponse(); d == nil || d.Status.Code != 429 || !strings.Contains(d.Body, `"code":"unknown_client"`) {
		t.Fatalf("Check(no source) = %v, want denied 429 unknown_client", resp)
	}
}

// deadRedis is the URL of a Redis nobody serves: a loopback port that was
// just free.
func deadRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "HTTP_PROTECT_REDIS_URL=redis://" + addr + "/0"
}

// TestGRPCStoreDown: under FailClosed a dead Redis is the gRPC error
// Unavailable for ShouldRateLimit (Envoy's failure_mode_deny decides) and
// a denied 503 for Check, neither saying anything of the store; under
// FailLocal protectd keeps deciding, exactly.
func TestGRPCStoreDown(t *testing.T) {
	redis := deadRedis(t)
	t.Run("closed", func(t *testing.T) {
		c := startGRPCDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", redis, "HTTP_PROTECT_ON_STORE_ERROR=closed")
		_, err := c.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor(entryAddress, "203.0.113.7")}})
		st, _ := status.FromError(err)
		if st.Code() != codes.Unavailable || strings.Contains(st.Message(), "127.0.0.1") || strings.Contains(st.Message(), "refused") {
			t.Fatalf("ShouldRateLimit with the store down = %v, want Unavailable saying nothing of the store", err)
		}
		resp, err := c.authz.Check(context.Background(), checkRequest("203.0.113.7", 1234))
		if err != nil {
			t.Fatal(err)
		}
		d := resp.GetDeniedResponse()
		if resp.Status.Code != int32(codes.Unavailable) || d == nil || d.Status.Code != 503 ||
			!strings.Contains(d.Body, `"code":"unavailable"`) || strings.Contains(d.Body+optionsOf(d.Headers), "127.0.0.1") {
			t.Fatalf("Check with the store down = %v, want UNAVAILABLE, denied 503 unavailable", resp)
		}
	})
	t.Run("local", func(t *testing.T) {
		c := startGRPCDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", redis, "HTTP_PROTECT_ON_STORE_ERROR=local", "HTTP_PROTECT_MAX_REQUESTS=3", "HTTP_PROTECT_BAN_LIMIT=-1")
		var got []string
		for range 5 {
			resp := shouldRateLimit(t, c, 0, descriptor(entryAddress, "203.0.113.7"))
			got = append(got, resp.OverallCode.String())
		}
		if want := "OK OK OK OVER_LIMIT OVER_LIMIT"; strings.Join(got, " ") != want {
			t.Fatalf("5 ShouldRateLimit with the store down (FailLocal, MAX_REQUESTS=3) = %v, want %s", got, want)
		}
	})
}

// TestGRPCOffByDefault: without HTTP_PROTECT_GRPC_LISTEN nothing listens
// for gRPC.
func TestGRPCOffByDefault(t *testing.T) {
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1")
	if l := d.log.lines(t, "grpc listening"); len(l) != 0 {
		t.Fatalf("log lines grpc listening = %v, want none", l)
	}
}

// TestGRPCUnixSocket: unix:PATH serves on a socket, a stale one left
// behind is replaced, and the listen setting is checked.
func TestGRPCUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.sock")
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close() // the file stays, as after a SIGKILL
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", envGRPCListen+"=unix:"+path)
	c := dialGRPC(t, "unix:"+path)
	resp := shouldRateLimit(t, c, 0, descriptor(entryAddress, "203.0.113.7"))
	if resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("ShouldRateLimit over unix:%s = %v, want OK", path, resp)
	}
	if code := d.stop(); code != exitOK {
		t.Fatalf("protectd with gRPC, stopped = exit %d, want %d; log:\n%s", code, exitOK, d.log)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after a graceful stop, stat %s = %v, want it removed", path, err)
	}
	// A live socket is never taken over.
	live, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	var stderr logBuffer
	env := []string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", envListen + "=127.0.0.1:0", envGRPCListen + "=unix:" + path}
	if code := run(context.Background(), nil, env, io.Discard, &stderr); code != exitFailure || !strings.Contains(stderr.String(), "another process listens on it") {
		t.Fatalf("run(%q) with a live socket = exit %d, %s; want %d, another process serves on it", env, code, &stderr, exitFailure)
	}
	for _, bad := range []string{"unix:", "8081", "localhost:http"} {
		_, err := loadSettings([]string{envGRPCListen + "=" + bad})
		if err == nil || !strings.Contains(err.Error(), envGRPCListen+`="`+bad+`"`) {
			t.Errorf("loadSettings(%s=%q) = %v, want an error quoting it", envGRPCListen, bad, err)
		}
	}
}

// protectd tells each connection, in its first HTTP/2 SETTINGS, that it
// takes grpcMaxStreams calls at once.
func TestGRPCStreamBound(t *testing.T) {
	c := startGRPCDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=none")
	addr := c.d.log.lines(t, "grpc listening")[0]["addr"].(string)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame = %v, want SETTINGS", f)
	}
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != grpcMaxStreams {
		t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS = %d (set %v), want %d", v, ok, grpcMaxStreams)
	}
}
