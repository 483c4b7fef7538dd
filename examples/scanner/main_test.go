package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
)

func newSite(t *testing.T) (http.Handler, *protect.Protector) {
	t.Helper()
	trap, err := protect.New(trapConfig(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trap.Close() })
	return newHandler(trap), trap
}

type result struct {
	code       int
	retryAfter string
	body       string
}

func get(h http.Handler, peer, path string) result {
	r := httptest.NewRequest("GET", path, nil)
	r.RemoteAddr = peer
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return result{w.Code, w.Header().Get("Retry-After"), w.Body.String()}
}

func count(t *testing.T, trap *protect.Protector, addr string) int64 {
	t.Helper()
	st, err := trap.Inspect(t.Context(), protect.Key{Prefix: netip.PrefixFrom(netip.MustParseAddr(addr), 32)})
	if err != nil {
		t.Fatal(err)
	}
	return st.Count
}

var probes = []string{"/.env", "/.git/config", "/phpmyadmin/", "/admin.php", "/backup.zip", "/config.json"}

func TestReadersAreNeverCounted(t *testing.T) {
	h, trap := newSite(t)
	for i := range 500 {
		path := []string{"/", "/about"}[i%2]
		if got := get(h, "192.0.2.1:1", path); got.code != 200 {
			t.Fatalf("request %d, %s: %+v", i+1, path, got)
		}
	}
	if n := count(t, trap, "192.0.2.1"); n != 0 {
		t.Fatalf("a reader was counted: %d", n)
	}
}

func TestScannerBanned(t *testing.T) {
	tests := []struct {
		probes   int
		wantNext int
	}{
		{probes: 5, wantNext: 200},
		{probes: 6, wantNext: 403},
	}
	for _, tt := range tests {
		t.Run(strings.Join(probes[:tt.probes], ","), func(t *testing.T) {
			h, trap := newSite(t)
			const scanner = "198.51.100.66:40000"
			for _, p := range probes[:tt.probes] {
				if got := get(h, scanner, p); got.code != 404 {
					t.Fatalf("probe %s: %+v", p, got)
				}
			}
			for _, p := range []string{"/about", "/"} {
				if got := get(h, scanner, p); got.code != tt.wantNext {
					t.Fatalf("after %d probes, %s: %+v; want %d", tt.probes, p, got, tt.wantNext)
				}
			}
			bans, err := trap.Bans(t.Context(), protect.BanFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if tt.probes < 6 {
				if len(bans) != 0 || count(t, trap, "198.51.100.66") != 5 {
					t.Fatalf("five probes: bans %+v", bans)
				}
				return
			}
			if len(bans) != 1 || bans[0].Key.String() != "198.51.100.66" || bans[0].Reason != "failures passed the ban limit of 5" ||
				bans[0].Expires.Sub(bans[0].Created) != 24*time.Hour {
				t.Fatalf("bans %+v", bans)
			}
			if got := get(h, scanner, "/about"); got.retryAfter != "86400" || !strings.Contains(got.body, `"code":"banned"`) {
				t.Fatalf("banned response: %+v", got)
			}
		})
	}
}

func TestHoneypotBansAtOnce(t *testing.T) {
	h, trap := newSite(t)
	const scanner = "203.0.113.99:1"
	if got := get(h, scanner, "/wp-login.php"); got.code != 403 || got.retryAfter != "86400" {
		t.Fatalf("/wp-login.php: %+v", got)
	}
	if got := get(h, scanner, "/"); got.code != 403 {
		t.Fatalf("home after the honeypot: %+v", got)
	}
	bans, err := trap.Bans(t.Context(), protect.BanFilter{})
	if err != nil || len(bans) != 1 || bans[0].Key.String() != "203.0.113.99" || bans[0].Offense != 1 {
		t.Fatalf("bans %+v %v", bans, err)
	}
	if got := get(h, "192.0.2.2:1", "/"); got.code != 200 {
		t.Fatalf("another client: %+v", got)
	}
}

func TestRunPrintsHowToProbe(t *testing.T) {
	var out strings.Builder
	if err := run("127.0.0.1:-1", &out, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("run accepted a bad address")
	}
	if !strings.Contains(out.String(), "curl -i http://127.0.0.1:-1/about") {
		t.Fatalf("output:\n%s", out.String())
	}
}
