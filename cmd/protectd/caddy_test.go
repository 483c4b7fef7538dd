package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const caddyfile = "../../examples/proxies/Caddyfile"

// caddyBins returns the Caddy binaries to test, or skips (fails under
// CI, which sets PROTECT_CADDY_BINS to two).
func caddyBins(t *testing.T) []string {
	t.Helper()
	if v := os.Getenv("PROTECT_CADDY_BINS"); v != "" {
		bins := strings.Split(v, ",")
		for _, b := range bins {
			if _, err := os.Stat(b); err != nil {
				t.Fatalf("PROTECT_CADDY_BINS=%q: %v", v, err)
			}
		}
		if os.Getenv("CI") == "true" && len(bins) < 2 {
			t.Fatalf("CI=true but PROTECT_CADDY_BINS=%q names %d Caddy, want Debian's and a current one (.ci/parts/30-caddy.sh)", v, len(bins))
		}
		return bins
	}
	return []string{needBinary(t, "caddy", ".ci/parts/30-caddy.sh")}
}

// startCaddy runs bin with the shipped Caddyfile in front of protectd (an
// upstream address in Caddy's format: 127.0.0.1:8089 or
// unix//run/protectd.sock) and app, and returns the address it listens
// on.
func startCaddy(t *testing.T, bin, protectd, app string) string {
	t.Helper()
	conf, err := os.ReadFile(caddyfile)
	if err != nil {
		t.Fatal(err)
	}
	return runCaddyfile(t, bin, string(conf), protectd, app)
}

// startCaddyOpen is startCaddy with the Caddyfile changed to fail open as
// its handle_errors comment says: the lines of the 503 replaced with a
// reverse_proxy to the app.
func startCaddyOpen(t *testing.T, bin, protectd, app string) string {
	t.Helper()
	conf, err := os.ReadFile(caddyfile)
	if err != nil {
		t.Fatal(err)
	}
	s := string(conf)
	from, to := strings.Index(s, "\t\t\theader Retry-After 5\n"), strings.Index(s, "` 503\n")
	if from < 0 || to < from {
		t.Fatalf("%s = no 503 lines in handle_errors where the test expects them", caddyfile)
	}
	s = s[:from] + "\t\t\treverse_proxy 127.0.0.1:3000\n" + s[to+len("` 503\n"):]
	return runCaddyfile(t, bin, s, protectd, app)
}

// runCaddyfile runs bin with conf, its addresses replaced.
func runCaddyfile(t *testing.T, bin, conf, protectd, app string) string {
	t.Helper()
	dir := t.TempDir()
	listen := freePort(t)
	_, port, _ := strings.Cut(listen, ":")
	// handle_errors names protectd by its host:port, or its socket's path.
	hostport := strings.TrimPrefix(protectd, "unix/")
	replaced := strings.NewReplacer(
		"vars {http.reverse_proxy.upstream.hostport} 127.0.0.1:8089", "vars {http.reverse_proxy.upstream.hostport} "+hostport,
		"127.0.0.1:8089", protectd,
		"127.0.0.1:3000", app,
		// The test's Caddy listens on loopback only.
		":8080 {", ":"+port+" {\n\tbind 127.0.0.1",
	).Replace(conf)
	if !strings.Contains(replaced, protectd) || !strings.Contains(replaced, "hostport} "+hostport) || !strings.Contains(replaced, app) || !strings.Contains(replaced, ":"+port+" {") {
		t.Fatalf("%s with its addresses replaced = %s; want protectd's address and its host:port or path, the app's and the port: the addresses are not where the test expects them", caddyfile, replaced)
	}
	// The shipped global options turn the admin endpoint off, so several
	// Caddy may run here (TestCaddyfileGlobalOptions). What Caddy saves
	// goes to dir.
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(replaced), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--adapter", "caddyfile", "--config", path)
	cmd.Env = []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "XDG_DATA_HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	startProxy(t, "caddy "+bin, listen, syscall.SIGTERM, cmd)
	return listen
}

// TestCaddy runs examples/proxies/Caddyfile, as shipped with its
// addresses changed, with every Caddy of PROTECT_CADDY_BINS (CI sets
// Debian's 2.6.2 and a current one built from the module proxy; without
// it, the caddy on PATH) in front of one protectd: the seed scenario of
// TestNginx for one client each, a client in SAFE_NETWORKS (protectd
// answers it with no header to copy) whose forged copied headers never
// reach the app, the app's own failure passed on as Caddy's 502, and,
// protectd stopped, 503 unavailable (and, changed to fail open as its
// comment says, the app's answer).
func TestCaddy(t *testing.T) {
	bins := caddyBins(t)
	app := startUpstream(t)
	d := startDaemon(t, append(seedEnv, "HTTP_PROTECT_SAFE_NETWORKS=127.0.0.9/32")...)
	sites := make([]string, len(bins))
	for i, bin := range bins {
		sites[i] = "http://" + startCaddy(t, bin, d.addr, app.addr)
	}
	for i, bin := range bins {
		proxy := "caddy " + bin
		client := []string{"127.0.0.2", "127.0.0.3", "127.0.0.5"}[i%3]
		seedScenario(t, proxy, sites[i], client, d, app)

		// protectd serves a safe client with no header to copy: the
		// client's own RateLimit and X-Protect-Key must not reach the app
		// in their place (GHSA-7r4p-vjf4-gxv4).
		safe := clientFrom("127.0.0.9")
		a := get(t, safe, sites[i]+"/", hdrKey, "forged", "RateLimit", "forged", "RateLimit-Policy", "forged")
		if a.code != 200 || app.keys.Load() != "" || app.rateLimit.Load() != "" || app.rateLimitPolicy.Load() != "" {
			t.Fatalf("GET / from a safe client through %s with forged copied headers = %d, the app got %s %q, RateLimit %q, RateLimit-Policy %q; want 200, none", proxy,
				a.code, hdrKey, app.keys.Load(), app.rateLimit.Load(), app.rateLimitPolicy.Load())
		}
		noProtectHeaders(t, "GET / from a safe client through "+proxy, a)
		for _, name := range []string{"Ratelimit", "Ratelimit-Policy"} {
			if v, ok := a.header[name]; ok {
				t.Fatalf("GET / from a safe client through %s = %s: %q, want none (protectd gave none)", proxy, name, v)
			}
		}

		// The app's own 403 reaches the client as the app wrote it.
		if a := get(t, safe, sites[i]+"/forbidden"); a.code != 403 || a.body != "the app says no\n" {
			t.Fatalf("GET /forbidden through %s = %d %q, want the app's 403 \"the app says no\"", proxy, a.code, a.body)
		}
	}
	open := "http://" + startCaddyOpen(t, bins[0], d.addr, app.addr)
	if a := get(t, clientFrom("127.0.0.7"), open+"/"); a.code != 200 || a.header.Get("RateLimit") != `"protect";r=99;t=3600` {
		t.Fatalf("GET / through caddy %s failing open, protectd up = %d %v, want 200, RateLimit r=99;t=3600", bins[0], a.code, a.header)
	}

	// The app down, protectd up: the client gets Caddy's 502 for the app,
	// not protectd's "unavailable".
	noApp := "http://" + startCaddy(t, bins[0], d.addr, freePort(t))
	if a := get(t, clientFrom("127.0.0.6"), noApp+"/"); a.code != 502 || a.header.Get("Retry-After") != "" {
		t.Fatalf("GET / through caddy %s with the app down = %d %v %q; want Caddy's 502, without Retry-After", bins[0], a.code, a.header, a.body)
	}

	if code := d.stop(); code != exitOK {
		t.Fatalf("d.stop() = exit %d, want 0", code)
	}
	for i, bin := range bins {
		wantUnavailable(t, "caddy "+bin, sites[i], clientFrom("127.0.0.3"), app)
	}
	// Even the banned client is served by the fail-open Caddy.
	wantServedUnchecked(t, "caddy "+bins[0]+" failing open", open, clientFrom("127.0.0.2"), app)
}

// TestCaddyfileGlobalOptions: the shipped Caddyfile, its site address
// given a host name as a user would (localhost:8080), adapts with every
// Caddy to one server on :8080 with automatic HTTPS off and no admin
// endpoint: Caddy binds no port 80, issues no certificate and installs
// no root CA into the system's trust store.
func TestCaddyfileGlobalOptions(t *testing.T) {
	conf, err := os.ReadFile(caddyfile)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(conf), "\n:8080 {\n", "\nlocalhost:8080 {\n", 1)
	if edited == string(conf) {
		t.Fatalf("%s = no \":8080 {\" line where the test expects it", caddyfile)
	}
	for _, bin := range caddyBins(t) {
		dir := t.TempDir()
		path := filepath.Join(dir, "Caddyfile")
		if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "adapt", "--adapter", "caddyfile", "--config", path)
		cmd.Env = []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "XDG_DATA_HOME=" + dir, "PATH=" + os.Getenv("PATH")}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s adapt = %v, want the JSON config", bin, err)
		}
		var cfg struct {
			Admin struct {
				Disabled bool `json:"disabled"`
			} `json:"admin"`
			Apps struct {
				HTTP struct {
					Servers map[string]struct {
						Listen         []string `json:"listen"`
						AutomaticHTTPS struct {
							Disable bool `json:"disable"`
						} `json:"automatic_https"`
					} `json:"servers"`
				} `json:"http"`
			} `json:"apps"`
		}
		// Caddy 2.6 may print a warning after the config: the first value is it.
		if err := json.NewDecoder(strings.NewReader(string(out))).Decode(&cfg); err != nil {
			t.Fatalf("%s adapt = %q: %v, want JSON", bin, out, err)
		}
		srv, ok := cfg.Apps.HTTP.Servers["srv0"]
		if !cfg.Admin.Disabled || len(cfg.Apps.HTTP.Servers) != 1 || !ok || strings.Join(srv.Listen, ",") != ":8080" || !srv.AutomaticHTTPS.Disable {
			t.Errorf("%s adapt of the Caddyfile with localhost:8080 = admin disabled %v, servers %+v; want admin disabled, one server on :8080 with automatic HTTPS disabled", bin, cfg.Admin.Disabled, cfg.Apps.HTTP.Servers)
		}
	}
}
