package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkVerify is one /verify of an allowed request as nginx sends it,
// through the handler alone (no network).
func BenchmarkVerify(b *testing.B) {
	h, _ := testVerifier(b, trusted, "HTTP_PROTECT_MAX_REQUESTS=1000000000000", "HTTP_PROTECT_BAN_LIMIT=-1")
	r := httptest.NewRequest("GET", "/verify", nil)
	r.RemoteAddr = proxy
	r.Header.Set("X-Forwarded-For", "203.0.113.7")
	r.Header.Set("X-Original-URI", "/api/items?page=2")
	r.Header.Set("X-Original-Method", "GET")
	r.Header.Set(hdrRefusalStatus, "403")
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, r)
		if w.code != 200 {
			b.Fatalf("GET /verify = %d, want 200", w.code)
		}
	}
}

type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
