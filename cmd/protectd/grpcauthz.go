package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"

	"github.com/httpprotect/protect"
)

// authzService is envoy.service.auth.v3.Authorization: Envoy's ext_authz
// filter in gRPC mode, and Istio's CUSTOM action.
type authzService struct {
	authv3.UnimplementedAuthorizationServer
	v *verifier
}

// Check decides the request Envoy describes, as /verify decides one: the
// peer is the request's source address (the downstream Envoy saw), and
// the forwarding header (HTTP_PROTECT_PROXY_HEADER, X-Forwarded-For by
// default) is read only when that peer is a trusted proxy, by the rules
// of Protector.Verify. Check counts addresses only: it never reads
// X-Protect-Consumer or X-Protect-Plan, which reach it from the client
// unless a filter before it strips them; consumers are counted by
// ShouldRateLimit, from descriptors Envoy's own route config builds.
//
// Allowed: ok_response, the RateLimit fields added to the response, and
// X-Protect-Key set on the upstream request. Refused: denied_response
// with the decision's status, its headers (Retry-After, the RateLimit
// fields, Cache-Control, Content-Type) and its problem+json body;
// Challenged, with the challenge on: 403 and the page, with its headers
// (Content-Security-Policy among them), returning to the request's path.
// A valid pass in the request's Cookie header lets the client through,
// as /verify does. Under
// FailClosed a dead store is such a refusal, 503: an answer, not an
// error, so Envoy's failure_mode_allow cannot open it.
func (s *authzService) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	r := s.request(ctx, req)
	d, err := s.v.p.Verify(ctx, r)
	if err != nil { // ctx ended: Envoy gave up on the call
		return nil, status.FromContextError(err).Err()
	}
	h := http.Header{}
	if !d.Refused() {
		d.WriteHeaders(h)
		ok := &authv3.OkHttpResponse{ResponseHeadersToAdd: headerOptions(h, corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD)}
		if !d.Key.IsZero() {
			ok.Headers = []*corev3.HeaderValueOption{{
				Header:       &corev3.HeaderValue{Key: strings.ToLower(hdrKey), Value: d.Key.String()},
				AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
			}}
		}
		return &authv3.CheckResponse{
			Status:       &rpcstatus.Status{Code: int32(code.Code_OK)},
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: ok},
		}, nil
	}
	var body bytes.Buffer
	if d.Status == protect.Challenged && s.v.chal != nil {
		s.v.writePage(&recorder{h: h, body: &body}, &d, s.v.chal.key(&d), req.GetAttributes().GetRequest().GetHttp().GetPath())
	} else {
		d.WriteResponse(&recorder{h: h, body: &body})
	}
	httpCode := d.StatusCode()
	attrs := append(refusalAttrs(d, httpCode),
		slog.String("method", clip(r.Method)), slog.String("uri", clip(req.GetAttributes().GetRequest().GetHttp().GetPath())),
		slog.String("via", "grpc"))
	s.v.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelInfo, "refused", attrs...)
	s.v.countRefusal(d)
	rpc := code.Code_PERMISSION_DENIED
	if httpCode == http.StatusServiceUnavailable {
		rpc = code.Code_UNAVAILABLE
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(rpc)},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(httpCode)},
			Headers: headerOptions(h, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
			Body:    body.String(),
		}},
	}, nil
}

// request is the HTTP request Verify is asked about: the source address
// as its peer, and of its headers only the forwarding header and the
// Cookie header (for the challenge's pass, the one cookie read), so
// that no other header the client wrote can steer the decision.
func (s *authzService) request(ctx context.Context, req *authv3.CheckRequest) *http.Request {
	attrs := req.GetAttributes()
	hreq := attrs.GetRequest().GetHttp()
	r := (&http.Request{Method: hreq.GetMethod(), Header: http.Header{}}).WithContext(ctx)
	if sa := attrs.GetSource().GetAddress().GetSocketAddress(); sa != nil {
		r.RemoteAddr = net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10))
	}
	name := http.CanonicalHeaderKey(s.v.p.Config().ProxyHeader)
	keep := func(k string) (string, bool) {
		switch {
		case strings.EqualFold(k, name):
			return name, true
		case s.v.chal != nil && strings.EqualFold(k, "Cookie"):
			return "Cookie", true
		}
		return "", false
	}
	if hm := hreq.GetHeaderMap(); hm != nil {
		// header_map (Envoy's encode_raw_headers) keeps every line.
		for _, hv := range hm.GetHeaders() {
			if k, ok := keep(hv.GetKey()); ok {
				v := hv.GetValue()
				if raw := hv.GetRawValue(); len(raw) > 0 {
					v = string(raw)
				}
				r.Header[k] = append(r.Header[k], v)
			}
		}
		return r
	}
	// headers: Envoy joins a header's lines with commas, which keeps an
	// X-Forwarded-For list in order (and Cookie's with "; ").
	for k, v := range hreq.GetHeaders() {
		if k, ok := keep(k); ok {
			r.Header[k] = append(r.Header[k], v)
		}
	}
	return r
}

// headerOptions turns h into Envoy header options, as headerValues does:
// each name's first line with action, its other lines appended.
func headerOptions(h http.Header, action corev3.HeaderValueOption_HeaderAppendAction) []*corev3.HeaderValueOption {
	var out []*corev3.HeaderValueOption
	for _, k := range sortedKeys(h) {
		for i, v := range h[k] {
			a := action
			if i > 0 {
				a = corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
			}
			out = append(out, &corev3.HeaderValueOption{
				Header:       &corev3.HeaderValue{Key: lowerName(k), Value: v},
				AppendAction: a,
			})
		}
	}
	return out
}
