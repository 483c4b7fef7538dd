package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/httpprotect/protect"
)

func TestDemo(t *testing.T) {
	p, err := protect.New(demoConfig(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv := httptest.NewServer(newHandler(p))
	t.Cleanup(srv.Close)

	get := func(path string) *http.Response {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	loop := func(n int) string {
		var codes []string
		for range n {
			resp := get("/")
			codes = append(codes, fmt.Sprint(resp.StatusCode))
		}
		return strings.Join(codes, " ")
	}
	// The loop the demo prints limits, and does not ban.
	if got := loop(8); got != "200 200 200 200 200 429 429 429" {
		t.Fatalf("loop(8), the printed loop = %s, want 5 × 200, then 3 × 429", got)
	}
	// The admin page does not count: 100 reads, still not banned.
	for range 100 {
		if resp := get("/bans"); resp.StatusCode != 200 {
			t.Fatalf("GET /bans = %d, want 200", resp.StatusCode)
		}
	}
	if bans, err := p.Bans(t.Context(), protect.BanFilter{}); err != nil || len(bans) != 0 {
		t.Fatalf("Bans() after the printed loop = %+v, %v; want none", bans, err)
	}
	// Run twice without a pause: the 11th request passes BanLimit 10.
	if got := loop(8); got != "429 429 403 403 403 403 403 403" {
		t.Fatalf("loop(8) again = %s, want 429 429, then 6 × 403", got)
	}
	// Banned, the client still reads the ban list: it is outside the
	// protector.
	resp := get("/bans")
	var bans []struct{ Key string }
	if err := json.NewDecoder(resp.Body).Decode(&bans); err != nil || resp.StatusCode != 200 || len(bans) != 1 || bans[0].Key != "127.0.0.1" {
		t.Fatalf("GET /bans while banned = %d %+v, %v; want 200 and the ban of 127.0.0.1", resp.StatusCode, bans, err)
	}
	if resp := get("/"); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Retry-After") != "60" {
		t.Fatalf("GET / while banned = %d, Retry-After %q; want 403, 60", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func TestRunPrintsHowToProbe(t *testing.T) {
	var out strings.Builder
	err := run("127.0.0.1:-1", &out, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("run(127.0.0.1:-1) = nil, want an error for a bad address")
	}
	if !strings.Contains(out.String(), "curl -i http://127.0.0.1:-1/") || !strings.Contains(out.String(), "$(seq 8)") {
		t.Fatalf("run(127.0.0.1:-1) printed\n%s\nwant the curl loop for that address", out.String())
	}
}
