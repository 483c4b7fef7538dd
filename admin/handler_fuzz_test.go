package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// Whatever a client sends, the API answers with a status it documents
// and a body that is its JSON: a record for 2xx, a problem with a code
// otherwise; bad input is 400 (or 404 for a namespace), never a 5xx.
func FuzzHandler(f *testing.F) {
	for _, seed := range [][3]string{
		{"GET", "/v1/bans?within=10.0.0.0/8&source=auto&limit=3", ""},
		{"GET", "/v1/bans?q=203.0&reason=scan&sort=-key&offset=2&limit=1", ""},
		{"GET", "/v1/bans?covers=2001:db8::1&sort=key", ""},
		{"POST", "/v1/bans", `{"targets": ["198.51.100.0/24"], "for": "2h"}`},
		{"POST", "/v1/bans", `{"targets": ["consumer:x"], "permanent": true}`},
		{"DELETE", "/v1/bans?target=1.2.3.4&force=true", ""},
		{"DELETE", "/v1/bans?all=true", ""},
		{"GET", "/v1/inspect?target=2001:db8::1", ""},
		{"GET", "/v1/explain?remote=10.0.0.1:1&header=X-Forwarded-For:%201.2.3.4", ""},
		{"GET", "/v1/check?addr=::ffff:1.2.3.4", ""},
		{"GET", "/v1/protectors?namespace=protect:", ""},
		{"POST", "/v1/bans", `{"targets": ["203.0.113.9"], "reason": "` + strings.Repeat("r", protect.MaxReasonLen+1) + `"}`},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	p, err := protect.New(protect.Config{TrustedProxies: []string{"10.0.0.0/8"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { p.Close() })
	h := admin.Handler(p)
	f.Fuzz(func(t *testing.T, method, target, body string) {
		r, ok := fuzzRequest(method, target, body, "GET", "POST", "DELETE", "PUT")
		if !ok {
			return
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var v any
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
			t.Fatalf("%s %s %q = %d, body %q: not JSON", method, target, body, w.Code, w.Body.String())
		}
		switch {
		case w.Code == 200 || w.Code == 201:
		case w.Code == 400 || w.Code == 404 || w.Code == 405:
			var p admin.Problem
			if json.Unmarshal(w.Body.Bytes(), &p) != nil || p.Code == "" || p.Status != w.Code {
				t.Fatalf("%s %s %q = %d %q, want a problem with a code", method, target, body, w.Code, w.Body.String())
			}
		default:
			t.Fatalf("%s %s %q = %d %q, want 200, 201, 400, 404 or 405 from a memory store", method, target, body, w.Code, w.Body.String())
		}
	})
}

// fuzzRequest is a request of method, one of methods, for target, as the
// server parsed it whatever it holds, with body; false when the method
// is not one of them or target no request URI with a path.
func fuzzRequest(method, target, body string, methods ...string) (*http.Request, bool) {
	u, err := url.ParseRequestURI(target)
	if !slices.Contains(methods, method) || err != nil || !strings.HasPrefix(u.Path, "/") {
		return nil, false
	}
	r := httptest.NewRequest(method, "/", strings.NewReader(body))
	r.URL, r.RequestURI = u, ""
	return r, true
}
