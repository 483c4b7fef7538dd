package main

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

// socketDir returns a directory for a unix socket that other users may
// reach (not list): nginx's workers run as nobody under root.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "protectd-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestProxiesOverUnixSocket: nginx, Caddy and HAProxy, with the shipped
// configs pointed at protectd's unix socket as their comments say, give
// the seed scenario's answers, and 503 unavailable once protectd is
// stopped.
func TestProxiesOverUnixSocket(t *testing.T) {
	nginx := needNginx(t)
	caddy := caddyBins(t)[0]
	haproxy := needBinary(t, "haproxy", ".ci/parts/31-haproxy.sh")
	app := startUpstream(t)
	sock := filepath.Join(socketDir(t), "protectd.sock")
	d := startDaemon(t, append(seedEnv, envListen+"=unix:"+sock, "HTTP_PROTECT_TRUST_UNIX_SOCKET=true")...)
	if os.Geteuid() == 0 {
		// nginx's workers are nobody: the socket gets their group, as
		// docs/protectd.md says to do for the proxy's user.
		nobody, err := user.Lookup("nobody")
		if err != nil {
			t.Fatal(err)
		}
		gid, _ := strconv.Atoi(nobody.Gid)
		if err := os.Chown(sock, -1, gid); err != nil {
			t.Fatal(err)
		}
	}
	sites := []struct{ proxy, base string }{
		{"nginx", "http://" + startNginx(t, nginx, "site-fail-closed.conf", "unix:"+sock, app.addr)},
		{"caddy " + caddy, "http://" + startCaddy(t, caddy, "unix/"+sock, app.addr)},
		{"haproxy", "http://" + startHAProxy(t, haproxy, "unix@"+sock, app.addr, "closed")},
	}
	for i, s := range sites {
		seedScenario(t, s.proxy+" over "+sock, s.base, []string{"127.0.0.2", "127.0.0.3", "127.0.0.5"}[i], d, app)
	}
	if code := d.stop(); code != exitOK {
		t.Fatalf("d.stop() = exit %d, want 0", code)
	}
	for _, s := range sites {
		wantUnavailable(t, s.proxy+" over "+sock, s.base, clientFrom("127.0.0.6"), app)
	}
}
