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
	"github.com/httpprotect/protect/admin"
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
	st, err := admin.New(trap).InspectKey(t.Context(), protect.Key{Prefix: netip.PrefixFrom(netip.MustParseAddr(addr), 32)})
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
			t.Fatalf("get(192.0.2.1, %s) request %d = %+v, want 200", path, i+1, got)
		}
	}
	if n := count(t, trap, "192.0.2.1"); n != 0 {
		t.Fatalf("count(192.0.2.1), a reader = %d, want 0", n)
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
					t.Fatalf("get(%s, %s), a probe = %+v, want 404", scanner, p, got)
				}
			}
			for _, p := range []string{"/about", "/"} {
				if got := get(h, scanner, p); got.code != tt.wantNext {
					t.Fatalf("get(%s, %s) after %d probes = %+v, want %d", scanner, p, tt.probes, got, tt.wantNext)
				}
			}
			bans, err := admin.New(trap).Bans(t.Context(), admin.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			if tt.probes < 6 {
				if len(bans) != 0 || count(t, trap, "198.51.100.66") != 5 {
					t.Fatalf("trap.Bans() after five probes = %+v, count %d; want none, 5", bans, count(t, trap, "198.51.100.66"))
				}
				return
			}
			if len(bans) != 1 || bans[0].Key.String() != "198.51.100.66" || bans[0].Reason != "failures passed the ban limit of 5" ||
				bans[0].Expires.Sub(bans[0].Created) != 24*time.Hour {
				t.Fatalf("trap.Bans() = %+v, want one of 198.51.100.66 for 24h, passing the ban limit of 5", bans)
			}
			if got := get(h, scanner, "/about"); got.retryAfter != "86400" || !strings.Contains(got.body, `"code":"banned"`) {
				t.Fatalf("get(%s, /about) while banned = %+v, want Retry-After 86400 and the banned problem", scanner, got)
			}
		})
	}
}

func TestHoneypotBansAtOnce(t *testing.T) {
	h, trap := newSite(t)
	const scanner = "203.0.113.99:1"
	if got := get(h, scanner, "/wp-login.php"); got.code != 403 || got.retryAfter != "86400" {
		t.Fatalf("get(%s, /wp-login.php) = %+v, want 403, Retry-After 86400", scanner, got)
	}
	if got := get(h, scanner, "/"); got.code != 403 {
		t.Fatalf("get(%s, /) after the honeypot = %+v, want 403", scanner, got)
	}
	bans, err := admin.New(trap).Bans(t.Context(), admin.Filter{})
	if err != nil || len(bans) != 1 || bans[0].Key.String() != "203.0.113.99" || bans[0].Offense != 1 {
		t.Fatalf("trap.Bans() = %+v, %v; want one of 203.0.113.99, offense 1", bans, err)
	}
	if got := get(h, "192.0.2.2:1", "/"); got.code != 200 {
		t.Fatalf("get(192.0.2.2, /), another client = %+v, want 200", got)
	}
}

func TestRunPrintsHowToProbe(t *testing.T) {
	var out strings.Builder
	if err := run("127.0.0.1:-1", &out, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("run(127.0.0.1:-1) = nil, want an error for a bad address")
	}
	if !strings.Contains(out.String(), "curl -i http://127.0.0.1:-1/about") {
		t.Fatalf("run(127.0.0.1:-1) printed\n%s\nwant the curl example for /about", out.String())
	}
}
