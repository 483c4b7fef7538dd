package main

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/httpprotect/protect"
)

// The descriptor entries ShouldRateLimit reads. remote_address is what
// Envoy's remote_address action writes; consumer and plan are ours, for
// request_headers actions (or generic_key) of a route that has
// authenticated the consumer. Other entries (generic_key, a domain's
// own) are ignored: they do not separate counters, since protectd runs
// one protector.
const (
	entryAddress  = "remote_address"
	entryConsumer = "consumer"
	entryPlan     = "plan"
)

// rateLimitService is envoy.service.ratelimit.v3.RateLimitService.
type rateLimitService struct {
	rlsv3.UnimplementedRateLimitServiceServer
	v *verifier
	// name is the protector's Config.Name: the stream's limit's name.
	name string
	// dryRun is Config.DryRun: refusals are logged, and answered OK.
	dryRun bool
	// strayLogged keeps a misconfigured route from logging a line per
	// request: the first descriptor protectd cannot count is logged.
	strayLogged atomic.Bool
}

func newRateLimitService(v *verifier) *rateLimitService {
	c := v.p.Config()
	return &rateLimitService{v: v, name: c.Name, dryRun: c.DryRun}
}

// ShouldRateLimit decides each descriptor in order, one status each, and
// is OVER_LIMIT when any is. Every decided descriptor is counted, even
// after one refused: Envoy asks once per request, and each descriptor is
// a limit the request is held to, as a plan's limits are. A store failure
// that the failure policy does not absorb (FailClosed) is the gRPC error
// Unavailable, so that Envoy's failure_mode_deny decides, as it does for
// any rate limit service that cannot answer; its text never leaves
// protectd.
func (s *rateLimitService) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, 0, len(req.GetDescriptors())),
	}
	h := http.Header{}
	var retry time.Duration
	for _, desc := range req.GetDescriptors() {
		st, d, err := s.descriptor(ctx, desc, req.GetHitsAddend(), h)
		if err != nil {
			return nil, err
		}
		resp.Statuses = append(resp.Statuses, st)
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			retry = max(retry, d.RetryAfter)
		}
	}
	// Each refusal wrote its own Retry-After; the client must wait for
	// the longest.
	delete(h, "Retry-After")
	if retry > 0 {
		h["Retry-After"] = []string{strconv.FormatInt(ceilSeconds(retry.Seconds()), 10)}
	}
	resp.ResponseHeadersToAdd = headerValues(h)
	return resp, nil
}

// descriptor decides one descriptor, writing its RateLimit fields to h.
func (s *rateLimitService) descriptor(ctx context.Context, desc *ratelimitv3.RateLimitDescriptor, hits uint32, h http.Header) (*rlsv3.RateLimitResponse_DescriptorStatus, protect.Decision, error) {
	var addr, consumer, planName string
	var hasAddr, hasConsumer, hasPlan bool
	for _, e := range desc.GetEntries() {
		switch e.GetKey() {
		case entryAddress:
			addr, hasAddr = e.GetValue(), true
		case entryConsumer:
			consumer, hasConsumer = e.GetValue(), true
		case entryPlan:
			planName, hasPlan = e.GetValue(), true
		}
	}
	var (
		d    protect.Decision
		err  error
		plan *protect.Plan
	)
	switch {
	case desc.GetIsNegativeHits():
		// A refund: protect's limits take no tokens back.
		s.stray(ctx, desc, "negative hits are not supported")
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_UNKNOWN}, d, nil
	case hasConsumer:
		plan = s.v.plans[planName]
		if plan == nil {
			// Never unlimited, as /verify's unknown_plan: Envoy and
			// protectd disagree, and only their operator can settle it.
			s.v.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelError, "refused",
				slog.String("decision", "unknown_plan"), slog.String("code", "unknown_plan"),
				slog.String("plan", clip(planName)), slog.Bool("plan_given", hasPlan), slog.Bool("dry_run", s.dryRun), slog.String("via", "grpc"))
			if s.dryRun { // logged and served, as every dry-run refusal is
				return &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}, d, nil
			}
			return &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OVER_LIMIT}, d, nil
		}
		d, err = s.v.p.VerifyConsumerN(ctx, consumer, plan, hitsAddend(desc, hits))
	case hasAddr:
		// Strictly an address, as Envoy's remote_address action writes it:
		// anything else (a port, spaces, a name) is an unknown client,
		// refused and never counted. The stream counts requests, so the
		// cost is always one.
		a, perr := netip.ParseAddr(addr)
		if perr != nil {
			a = netip.Addr{}
		}
		d, err = s.v.p.VerifyAddr(ctx, a)
	default:
		s.stray(ctx, desc, "no remote_address or consumer entry")
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_UNKNOWN}, d, nil
	}
	if err != nil { // ctx ended: Envoy gave up on the call
		return nil, d, status.FromContextError(err).Err()
	}
	if d.Status == protect.Unavailable && d.Refused() {
		return nil, d, status.Error(codes.Unavailable, "protectd: store unavailable")
	}
	d.WriteHeaders(h)
	st := &rlsv3.RateLimitResponse_DescriptorStatus{
		Code:           rlsv3.RateLimitResponse_OK,
		CurrentLimit:   currentLimit(d, plan, s.name),
		LimitRemaining: clamp32(d.Remaining),
	}
	if reset := untilReset(d, h, s.name); reset > 0 {
		st.DurationUntilReset = durationpb.New(reset)
	}
	if d.Refused() {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		attrs := append(refusalAttrs(d, d.StatusCode()), slog.String("via", "grpc"))
		s.v.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelInfo, "refused", attrs...)
		s.v.countRefusal(d)
	}
	return st, d, nil
}

// stray logs, once, a descriptor protectd answers UNKNOWN without
// counting: Envoy takes it as not over the limit, so a route whose
// descriptors protectd cannot read is not limited, and its operator
// must hear of it.
func (s *rateLimitService) stray(ctx context.Context, desc *ratelimitv3.RateLimitDescriptor, why string) {
	if s.strayLogged.Swap(true) {
		return
	}
	keys := make([]string, 0, len(desc.GetEntries()))
	for _, e := range desc.GetEntries() {
		keys = append(keys, clip(e.GetKey()))
	}
	s.v.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelError, "descriptor not counted",
		slog.String("why", why), slog.Any("keys", keys), slog.String("via", "grpc"))
}

// hitsAddend is the cost of a descriptor: its own hits_addend, else the
// request's; 0 means 1, as Envoy's own rate limit service takes it.
func hitsAddend(desc *ratelimitv3.RateLimitDescriptor, hits uint32) int64 {
	n := uint64(hits)
	if v := desc.GetHitsAddend(); v != nil {
		n = v.GetValue()
	}
	if n == 0 {
		return 1
	}
	return int64(min(n, math.MaxInt64))
}

// currentLimit is the limit that decided d, in Envoy's terms: Limit
// requests per unit × multiplier. A quota's calendar window is its unit
// (HOUR, DAY, MONTH); any other window (the stream's TTL, a rate's
// Period) is the largest of WEEK, DAY, HOUR, MINUTE and SECOND that
// divides it in whole seconds, with the multiplier for the rest (a TTL of
// 10s is SECOND × 10, a Period of 90m is MINUTE × 90). The name is the
// limit's, as in the RateLimit fields. Nil when no limit decided (a ban,
// an unknown client).
func currentLimit(d protect.Decision, plan *protect.Plan, name string) *rlsv3.RateLimitResponse_RateLimit {
	if d.Limit <= 0 || d.Window <= 0 {
		return nil
	}
	if d.Policy != "" {
		name = d.Policy
	}
	rl := &rlsv3.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: clamp32(d.Limit)}
	if q, ok := quotaOf(plan, d.Policy); ok {
		switch q.Period {
		case protect.Hourly:
			rl.Unit = rlsv3.RateLimitResponse_RateLimit_HOUR
		case protect.Daily:
			rl.Unit = rlsv3.RateLimitResponse_RateLimit_DAY
		default:
			rl.Unit = rlsv3.RateLimitResponse_RateLimit_MONTH
		}
		return rl
	}
	secs := ceilSeconds(d.Window.Seconds())
	for _, u := range windowUnits {
		if secs%u.secs == 0 {
			rl.Unit = u.unit
			if n := secs / u.secs; n > 1 {
				rl.UnitMultiplier = wrapperspb.UInt32(clamp32(n))
			}
			return rl
		}
	}
	return rl // unreachable: SECOND divides every window
}

var windowUnits = [...]struct {
	secs int64
	unit rlsv3.RateLimitResponse_RateLimit_Unit
}{
	{7 * 86400, rlsv3.RateLimitResponse_RateLimit_WEEK},
	{86400, rlsv3.RateLimitResponse_RateLimit_DAY},
	{3600, rlsv3.RateLimitResponse_RateLimit_HOUR},
	{60, rlsv3.RateLimitResponse_RateLimit_MINUTE},
	{1, rlsv3.RateLimitResponse_RateLimit_SECOND},
}

// quotaOf is the quota of plan named name.
func quotaOf(plan *protect.Plan, name string) (protect.Quota, bool) {
	if plan == nil {
		return protect.Quota{}, false
	}
	for _, l := range plan.Limits() {
		if q, ok := l.(protect.Quota); ok && q.Name == name {
			return q, true
		}
	}
	return protect.Quota{}, false
}

// untilReset is duration_until_reset: for a refusal, its Retry-After;
// otherwise the t of the deciding limit's RateLimit item, the time until
// that limit is whole again (for the stream, the silence that resets it).
func untilReset(d protect.Decision, h http.Header, name string) time.Duration {
	if d.Refused() {
		return d.RetryAfter
	}
	if d.Policy != "" {
		name = d.Policy
	}
	for _, line := range h["Ratelimit"] {
		for item := range strings.SplitSeq(line, ",") {
			key, params, _ := strings.Cut(strings.TrimSpace(item), ";")
			if key != `"`+name+`"` {
				continue
			}
			for p := range strings.SplitSeq(params, ";") {
				if t, ok := strings.CutPrefix(p, "t="); ok {
					if n, err := strconv.ParseInt(t, 10, 64); err == nil {
						return time.Duration(n) * time.Second
					}
				}
			}
		}
	}
	return 0
}

// headerValues turns h into Envoy header values, one per line, names in
// lower case (as HTTP/2 sends them) and sorted, so that an answer is
// always the same for the same decisions.
func headerValues(h http.Header) []*corev3.HeaderValue {
	var out []*corev3.HeaderValue
	for _, k := range sortedKeys(h) {
		for _, v := range h[k] {
			out = append(out, &corev3.HeaderValue{Key: lowerName(k), Value: v})
		}
	}
	return out
}

// lowerName is k in lower case; the names decisions write are spelled
// out, so that answering allocates none.
func lowerName(k string) string {
	switch k {
	case "Ratelimit":
		return "ratelimit"
	case "Ratelimit-Policy":
		return "ratelimit-policy"
	case "Retry-After":
		return "retry-after"
	case "Cache-Control":
		return "cache-control"
	case "Content-Type":
		return "content-type"
	case "X-Content-Type-Options":
		return "x-content-type-options"
	}
	return strings.ToLower(k)
}

// sortedKeys are h's names in order.
func sortedKeys(h http.Header) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func clamp32(n int64) uint32 {
	if n < 0 {
		return 0
	}
	return uint32(min(n, math.MaxUint32))
}
