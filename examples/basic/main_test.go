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

	var codes []string
	for range 12 {
		resp, err := http.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, fmt.Sprint(resp.StatusCode))
	}
	// 5 served, 5 limited, the 11th passes BanLimit 10 and is banned.
	if got := strings.Join(codes, " "); got != "200 200 200 200 200 429 429 429 429 429 403 403" {
		t.Fatalf("codes: %s", got)
	}
	bans, err := p.Bans(t.Context(), protect.BanFilter{})
	if err != nil || len(bans) != 1 || bans[0].Key.String() != "127.0.0.1" {
		t.Fatalf("bans: %+v %v", bans, err)
	}
	// The ban covers every path, the ban list included.
	resp, err := http.Get(srv.URL + "/bans")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var problem struct{ Code string }
	json.NewDecoder(resp.Body).Decode(&problem)
	if resp.StatusCode != http.StatusForbidden || problem.Code != "banned" || resp.Header.Get("Retry-After") != "60" {
		t.Fatalf("/bans while banned: %d %q Retry-After %q", resp.StatusCode, problem.Code, resp.Header.Get("Retry-After"))
	}
}

func TestRunPrintsHowToProbe(t *testing.T) {
	var out strings.Builder
	err := run("127.0.0.1:-1", &out, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("run accepted a bad address")
	}
	if !strings.Contains(out.String(), "curl -i http://127.0.0.1:-1/") {
		t.Fatalf("output:\n%s", out.String())
	}
}
