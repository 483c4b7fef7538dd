package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestVerifyAllocs counts the allocations of one /verify through the
// handler (no network), as nginx asks: a client seen before, a consumer
// under a plan. The server's own (reading the
// request, the header map) are not in these.
func TestVerifyAllocs(t *testing.T) {
	h, _ := testVerifier(t, trusted, plans, "HTTP_PROTECT_MAX_REQUESTS=1000", "HTTP_PROTECT_BAN_LIMIT=-1")
	for _, tc := range []struct {
		name   string
		header []string
		runs   int
		want   float64
		code   int
	}{
		{"allowed address", []string{"X-Forwarded-For", "203.0.113.7"}, 500, 0, 200},
		// The plan's RateLimit value, made by the library for each answer
		// (what is left and when it resets both change): its text and its
		// []string.
		{"allowed consumer", []string{"X-Forwarded-For", "203.0.113.8", hdrConsumer, "acme", hdrPlan, "pro"}, 1, 2, 200},
	} {
		r := httptest.NewRequest("GET", "/verify", nil)
		r.RemoteAddr = proxy
		for i := 0; i+1 < len(tc.header); i += 2 {
			r.Header.Set(tc.header[i], tc.header[i+1])
		}
		r.Header.Set("X-Original-URI", "/api/items?page=2")
		r.Header.Set("X-Original-Method", "GET")
		r.Header.Set(hdrRefusalStatus, "403")
		w := &discardWriter{h: http.Header{}}
		got := testing.AllocsPerRun(tc.runs, func() {
			clear(w.h)
			h.ServeHTTP(w, r)
		})
		if w.code != tc.code || got != tc.want {
			t.Errorf("GET /verify, %s = %d, %v allocations each; want %d, %v", tc.name, w.code, got, tc.code, tc.want)
		}
	}
}
