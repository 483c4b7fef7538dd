package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Traefik and Envoy cannot run here. These tests hold protectd's handler
// to their forward-auth rules as their documentation states them (and,
// for Traefik, its forwardauth middleware's source): each proxy is
// modelled below by what it does with a client's request and with the
// auth answer, configured as examples/proxies/traefik.yml and
// examples/proxies/envoy-http.yaml are. By contract, not run: a change in
// either proxy's behaviour is not caught here.

// authPeer is the proxy's address as protectd sees it (trusted).
const authPeer = proxy

// hopHeaders are the hop-by-hop headers a proxy never forwards.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// askAuth sends the auth request req to protectd's handler from the
// proxy and returns the answer.
func askAuth(auth http.Handler, req *http.Request) *http.Response {
	req.RemoteAddr = authPeer
	w := httptest.NewRecorder()
	auth.ServeHTTP(w, req)
	return w.Result()
}

// traefik is Traefik's ForwardAuth (v2.10+, v3) behind traefik.yml's
// protect-strip headers middleware.
type traefik struct {
	auth, next http.Handler
	// traefik.yml's forwardAuth settings.
	trustForwardHeader  bool
	authRequestHeaders  []string
	authResponseHeaders []string
	// protect-strip: request headers removed before forwardAuth, and
	// response headers removed from whatever the client gets.
	stripRequest, stripResponse []string
}

func (tr traefik) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for _, h := range tr.stripResponse {
		w = stripWriter{w, h}
	}
	for _, h := range tr.stripRequest {
		r.Header.Del(h)
	}
	// The auth request: a GET to the address, with the client's headers
	// (without the hop-by-hop ones, only those of authRequestHeaders when
	// set, and without the client's X-Forwarded-* unless
	// trustForwardHeader), then X-Forwarded-For holding the client's
	// address and the X-Forwarded-* of the original request.
	fwd := httptest.NewRequest("GET", "/verify", nil)
	for k, v := range r.Header {
		fwd.Header[k] = append([]string(nil), v...)
	}
	for _, h := range hopHeaders {
		fwd.Header.Del(h)
	}
	if !tr.trustForwardHeader {
		for k := range fwd.Header {
			if strings.HasPrefix(k, "X-Forwarded-") {
				fwd.Header.Del(k)
			}
		}
	}
	if tr.authRequestHeaders != nil {
		kept := http.Header{}
		for _, h := range tr.authRequestHeaders {
			if v := fwd.Header.Values(h); len(v) > 0 {
				kept[http.CanonicalHeaderKey(h)] = v
			}
		}
		for k, v := range fwd.Header {
			if strings.HasPrefix(k, "X-Forwarded-") {
				kept[k] = v
			}
		}
		fwd.Header = kept
	}
	client, _, _ := strings.Cut(r.RemoteAddr, ":")
	if prior := fwd.Header.Values("X-Forwarded-For"); len(prior) > 0 {
		client = strings.Join(prior, ", ") + ", " + client
	}
	fwd.Header.Set("X-Forwarded-For", client)
	fwd.Header.Set("X-Forwarded-Method", r.Method)
	fwd.Header.Set("X-Forwarded-Proto", "http")
	fwd.Header.Set("X-Forwarded-Host", r.Host)
	fwd.Header.Set("X-Forwarded-Uri", r.URL.RequestURI())
	res := askAuth(tr.auth, fwd)
	body, _ := io.ReadAll(res.Body)

	// Not 2xx: the auth answer, whole (headers but hop-by-hop ones,
	// status, body), is the client's answer.
	if res.StatusCode < 200 || res.StatusCode >= 300 {
		for k, v := range res.Header {
			w.Header()[k] = v
		}
		for _, h := range hopHeaders {
			w.Header().Del(h)
		}
		w.WriteHeader(res.StatusCode)
		w.Write(body)
		return
	}
	// 2xx: authResponseHeaders replace the client's on the upstream's
	// request (removed when the answer lacks them); the response is the
	// upstream's.
	for _, h := range tr.authResponseHeaders {
		r.Header.Del(h)
		if v := res.Header.Values(h); len(v) > 0 {
			r.Header[http.CanonicalHeaderKey(h)] = v
		}
	}
	tr.next.ServeHTTP(w, r)
}

// stripWriter removes one header from the response when it is written.
type stripWriter struct {
	http.ResponseWriter
	name string
}

func (s stripWriter) WriteHeader(code int) {
	s.Header().Del(s.name)
	s.ResponseWriter.WriteHeader(code)
}

// recordingApp is the upstream: it answers 200 "hello" and keeps the
// request it got.
type recordingApp struct{ last *http.Request }

func (a *recordingApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.last = r
	io.WriteString(w, "hello\n")
}

// TestTraefikContract: behind Traefik's ForwardAuth as traefik.yml
// configures it, 300 requests of one client that forges X-Forwarded-For,
// X-Forwarded-* and a consumer are exactly 100 served, 150 refused with
// 429 and 50 banned with 403, each refusal reaching the client whole
// (status, Retry-After, RateLimit fields, problem+json) but for
// X-Protect-*; the RateLimit fields and X-Protect-Key of a served request
// reach only the app.
func TestTraefikContract(t *testing.T) {
	auth, _ := testVerifier(t, trusted, plans, "HTTP_PROTECT_MAX_REQUESTS=100", "HTTP_PROTECT_BAN_LIMIT=250", "HTTP_PROTECT_TTL=1h")
	app := &recordingApp{}
	tr := traefik{auth: auth, next: app,
		authRequestHeaders:  []string{hdrConsumer, hdrPlan},
		authResponseHeaders: []string{"RateLimit", "RateLimit-Policy", hdrKey},
		stripRequest:        []string{hdrConsumer, hdrPlan},
		stripResponse:       []string{hdrStatus, hdrCode, hdrKey, hdrProblem},
	}
	counts := map[int]int{}
	for i := range 300 {
		r := httptest.NewRequest("GET", "/hello?page=2", nil)
		r.RemoteAddr = "203.0.113.7:40000"
		r.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i%250+1))
		r.Header.Set("X-Forwarded-Uri", "/forged")
		r.Header.Set(hdrConsumer, fmt.Sprintf("acme-%d", i))
		r.Header.Set(hdrPlan, "pro")
		r.Header.Set(hdrKey, "forged")
		r.Header.Set("RateLimit", "forged")
		app.last = nil
		w := httptest.NewRecorder()
		tr.ServeHTTP(w, r)
		a := answer{w.Code, w.Result().Header, w.Body.String()}
		counts[a.code]++
		what := fmt.Sprintf("GET /hello #%d through Traefik's ForwardAuth", i+1)
		noProtectHeaders(t, what, a)
		switch {
		case i < 100:
			if a.code != 200 || a.body != "hello\n" || a.header.Get("RateLimit") != "" || app.last == nil {
				t.Fatalf("%s = %d %v %q; want the app's 200 hello, without RateLimit", what, a.code, a.header, a.body)
			}
			h := app.last.Header
			if h.Get(hdrKey) != "203.0.113.7" || h.Get("RateLimit") != fmt.Sprintf(`"protect";r=%d;t=3600`, 99-i) ||
				h.Get("RateLimit-Policy") != `"protect";q=100;w=3600` {
				t.Fatalf("%s: the app's request = %s %q, RateLimit %q, RateLimit-Policy %q; want 203.0.113.7, r=%d;t=3600, q=100;w=3600",
					what, hdrKey, h.Get(hdrKey), h.Get("RateLimit"), h.Get("RateLimit-Policy"), 99-i)
			}
		case i < 250:
			if a.code != 429 || a.header.Get("Retry-After") != "3600" || a.header.Get("RateLimit") != `"protect";r=0;t=3600` ||
				a.header.Get("RateLimit-Policy") != `"protect";q=100;w=3600` || problemCode(t, a) != "rate_limited" || app.last != nil {
				t.Fatalf("%s = %d %v %q; want 429 rate_limited, Retry-After 3600, the RateLimit fields, the app not asked", what, a.code, a.header, a.body)
			}
		default:
			if a.code != 403 || a.header.Get("Retry-After") != "3600" || problemCode(t, a) != "banned" || app.last != nil {
				t.Fatalf("%s = %d %v %q; want 403 banned, Retry-After 3600, the app not asked", what, a.code, a.header, a.body)
			}
		}
	}
	if counts[200] != 100 || counts[429] != 150 || counts[403] != 50 {
		t.Fatalf("300 × GET /hello through Traefik's ForwardAuth = %v, want 100 × 200, 150 × 429, 50 × 403", counts)
	}
}

// envoy is Envoy's ext_authz HTTP filter as envoy-http.yaml configures it:
// use_remote_address (the peer appended to X-Forwarded-For before the
// filter), allowed_headers, path_prefix /verify, and the allowed_*
// headers of authorization_response.
type envoy struct {
	auth, next        http.Handler
	failureModeAllow  bool
	allowedHeaders    []string // client headers sent to protectd
	clientHeaders     []string // allowed_client_headers, on a denial
	clientOnSuccess   []string // allowed_client_headers_on_success
	upstreamHeaders   []string // allowed_upstream_headers
	extraCheckHeaders []string // set by a filter of the operator's before ext_authz
}

func (e envoy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	client, _, _ := strings.Cut(r.RemoteAddr, ":")
	if prior := r.Header.Get("X-Forwarded-For"); prior != "" {
		client = prior + "," + client
	}
	r.Header.Set("X-Forwarded-For", client)
	// The check request: the original method, path_prefix followed by
	// the original path, no body, only the allowed headers.
	check := httptest.NewRequest(r.Method, "/verify"+r.URL.RequestURI(), nil)
	for _, h := range e.allowedHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			check.Header[http.CanonicalHeaderKey(h)] = v
		}
	}
	for i := 0; i+1 < len(e.extraCheckHeaders); i += 2 {
		check.Header.Set(e.extraCheckHeaders[i], e.extraCheckHeaders[i+1])
	}
	res := askAuth(e.auth, check)
	body, _ := io.ReadAll(res.Body)
	copyHeaders := func(dst http.Header, names []string) {
		for _, h := range names {
			if v := res.Header.Values(h); len(v) > 0 {
				dst[http.CanonicalHeaderKey(h)] = v
			}
		}
	}
	switch {
	case res.StatusCode == http.StatusOK: // exactly 200 allows
		copyHeaders(r.Header, e.upstreamHeaders)
		copyHeaders(w.Header(), e.clientOnSuccess)
		e.next.ServeHTTP(w, r)
	case res.StatusCode >= 500: // the auth service failed
		if e.failureModeAllow {
			e.next.ServeHTTP(w, r)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable) // status_on_error
	default: // denied: the status, the body and the allowed headers
		copyHeaders(w.Header(), e.clientHeaders)
		w.WriteHeader(res.StatusCode)
		w.Write(body)
	}
}

// TestEnvoyContract: behind Envoy's ext_authz (HTTP) as envoy-http.yaml
// configures it, protectd allows with exactly 200 (any other 2xx would
// be a denial) for any method and any path below /verify, refuses with
// 429 and 403 (never a 5xx, which Envoy takes for its failure) whatever
// the client forges, and answers an unknown plan with 503: Envoy's
// error, which failure_mode_allow lets through, as envoy.yaml says.
func TestEnvoyContract(t *testing.T) {
	auth, _ := testVerifier(t, trusted, plans, "HTTP_PROTECT_MAX_REQUESTS=2", "HTTP_PROTECT_BAN_LIMIT=3", "HTTP_PROTECT_TTL=1h")
	app := &recordingApp{}
	e := envoy{auth: auth, next: app,
		allowedHeaders:  []string{"X-Forwarded-For"},
		clientHeaders:   []string{"Retry-After", "RateLimit", "RateLimit-Policy", "Cache-Control", "Content-Type"},
		clientOnSuccess: []string{"RateLimit", "RateLimit-Policy"},
		upstreamHeaders: []string{hdrKey},
	}
	for i, tc := range []struct {
		method, target string
		code           int
		problem        string
	}{
		{"GET", "/", 200, ""},
		{"POST", "//a/../b?x=1", 200, ""},
		{"HEAD", "/c", 429, "rate_limited"},
		{"GET", "/d", 403, "banned"},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		r.RemoteAddr = "203.0.113.7:40000"
		r.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1))
		r.Header.Set(hdrConsumer, "acme")
		r.Header.Set(hdrPlan, "pro")
		app.last = nil
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		a := answer{w.Code, w.Result().Header, w.Body.String()}
		what := fmt.Sprintf("%s %s #%d through Envoy's ext_authz", tc.method, tc.target, i+1)
		noProtectHeaders(t, what, a)
		if tc.code == 200 {
			if a.code != 200 || app.last == nil || app.last.Header.Get(hdrKey) != "203.0.113.7" || a.header.Get("RateLimit-Policy") != `"protect";q=2;w=3600` {
				t.Fatalf("%s = %d %v, the app asked %v; want 200 from the app, RateLimit-Policy q=2;w=3600, %s 203.0.113.7 on its request", what, a.code, a.header, app.last != nil, hdrKey)
			}
			continue
		}
		if a.code != tc.code || a.header.Get("Retry-After") != "3600" || problemCode(t, a) != tc.problem || app.last != nil {
			t.Fatalf("%s = %d %v %q; want %d %s with Retry-After 3600, the app not asked", what, a.code, a.header, a.body, tc.code, tc.problem)
		}
	}

	// A filter of the operator's names a consumer under a plan protectd
	// does not know: protectd's 503 is Envoy's error.
	for _, allow := range []bool{false, true} {
		e := e
		e.failureModeAllow = allow
		e.extraCheckHeaders = []string{"X-Forwarded-For", "203.0.113.8", hdrConsumer, "acme", hdrPlan, "gold"}
		app.last = nil
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		want, served := 503, false
		if allow {
			want, served = 200, true
		}
		if w.Code != want || (app.last != nil) != served || w.Body.String() != map[bool]string{false: "", true: "hello\n"}[allow] {
			t.Fatalf("GET / of an unknown plan through Envoy's ext_authz, failure_mode_allow %v = %d %q, the app asked %v; want %d, the app asked %v",
				allow, w.Code, w.Body, app.last != nil, want, served)
		}
	}
}
