package main

import (
	"path/filepath"
	"testing"
)

// TestProxiesOverUnixSocket: Caddy and HAProxy, with the shipped configs
// pointed at protectd's unix socket as their comments say, give the seed
// scenario's answers, and 503 unavailable once protectd is stopped.
func TestProxiesOverUnixSocket(t *testing.T) {
	caddy := caddyBins(t)[0]
	haproxy := needBinary(t, "haproxy", ".ci/parts/31-haproxy.sh")
	app := startUpstream(t)
	sock := filepath.Join(t.TempDir(), "protectd.sock")
	d := startDaemon(t, append(seedEnv, envListen+"=unix:"+sock, "HTTP_PROTECT_TRUST_UNIX_SOCKET=true")...)
	sites := []struct{ proxy, base string }{
		{"caddy " + caddy, "http://" + startCaddy(t, caddy, "unix/"+sock, app.addr)},
		{"haproxy", "http://" + startHAProxy(t, haproxy, "unix@"+sock, app.addr, "closed")},
	}
	for i, s := range sites {
		seedScenario(t, s.proxy+" over "+sock, s.base, []string{"127.0.0.2", "127.0.0.3"}[i], d, app)
	}
	if code := d.stop(); code != exitOK {
		t.Fatalf("d.stop() = exit %d, want 0", code)
	}
	for _, s := range sites {
		wantUnavailable(t, s.proxy+" over "+sock, s.base, clientFrom("127.0.0.5"), app)
	}
}
