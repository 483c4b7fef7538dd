package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/httpprotect/protect"
)

// /metrics reports what the middleware decided, and scraping it is
// never counted: a banned client's scraper still reads it.
func TestMetrics(t *testing.T) {
	p, err := protect.New(demoConfig(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv := httptest.NewServer(withMetrics(p, newHandler(p)))
	t.Cleanup(srv.Close)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for range 12 {
		get("/")
	}
	code, body := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d, want 200", code)
	}
	for _, want := range []string{
		`protect_decisions_total{namespace="protect:",status="allowed"} 5`,
		`protect_decisions_total{namespace="protect:",status="limited"} 5`,
		`protect_decisions_total{namespace="protect:",status="banned"} 2`,
		`protect_bans_total{namespace="protect:",source="auto"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("GET /metrics = a body without %s, want it:\n%s", want, body)
		}
	}
}
