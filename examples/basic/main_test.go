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
	"github.com/httpprotect/protect/admin"
)

func TestDemo(t *testing.T) {
	p, err := protect.New(demoConfig(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv := httptest.NewServer(newHandler(p))
	t.Cleanup(srv.Close)
	adm := httptest.NewServer(newAdmin(p))
	t.Cleanup(adm.Close)

	get := func(path string) *http.Response {
		t.Helper()
		base := srv.URL
		if strings.HasPrefix(path, "/v1/") {
			base = adm.URL
		}
		resp, err := http.Get(base + path)
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
	// The admin API does not count: 100 reads, still not banned.
	for range 100 {
		if resp := get("/v1/bans"); resp.StatusCode != 200 {
			t.Fatalf("GET /v1/bans = %d, want 200", resp.StatusCode)
		}
	}
	if bans, err := admin.New(p).Bans(t.Context(), admin.Filter{}); err != nil || len(bans) != 0 {
		t.Fatalf("Bans() after the printed loop = %+v, %v; want none", bans, err)
	}
	// Run twice without a pause: the 11th request passes BanLimit 10.
	if got := loop(8); got != "429 429 403 403 403 403 403 403" {
		t.Fatalf("loop(8) again = %s, want 429 429, then 6 × 403", got)
	}
	// Banned, the client still reads the ban list, in protectctl's
	// -json schema: it is outside the protector.
	resp := get("/v1/bans")
	var bans []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&bans); err != nil || resp.StatusCode != 200 || len(bans) != 1 ||
		bans[0]["key"] != "127.0.0.1" || bans[0]["source"] != "auto" || bans[0]["seconds_left"] != 60.0 || bans[0]["ban_namespace"] != "protect:" {
		t.Fatalf("GET /v1/bans while banned = %d %+v, %v; want 200 and the ban of 127.0.0.1 with key, source, seconds_left 60, ban_namespace", resp.StatusCode, bans, err)
	}
	if resp := get("/"); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Retry-After") != "60" {
		t.Fatalf("GET / while banned = %d, Retry-After %q; want 403, 60", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// The lift the demo prints; the next request is served.
	req, _ := http.NewRequest("DELETE", adm.URL+"/v1/bans?target=127.0.0.1", nil)
	lift, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	lift.Body.Close()
	if resp := get("/"); lift.StatusCode != 200 || resp.StatusCode != 200 {
		t.Fatalf("DELETE /v1/bans?target=127.0.0.1 = %d, then GET / = %d; want 200, 200", lift.StatusCode, resp.StatusCode)
	}
}

func TestRunPrintsHowToProbe(t *testing.T) {
	var out strings.Builder
	err := run("127.0.0.1:-1", "127.0.0.1:-2", &out, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("run(127.0.0.1:-1) = nil, want an error for a bad address")
	}
	if !strings.Contains(out.String(), "curl -i http://127.0.0.1:-1/") || !strings.Contains(out.String(), "$(seq 8)") ||
		!strings.Contains(out.String(), "curl -s http://127.0.0.1:-2/v1/bans") {
		t.Fatalf("run(127.0.0.1:-1) printed\n%s\nwant the curl loop for that address", out.String())
	}
}
