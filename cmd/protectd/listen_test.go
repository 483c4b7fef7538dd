package main

import (
	"context"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// unixClient is an HTTP client that reaches every URL over the socket
// at path.
func unixClient(path string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

// TestListenUnix: with HTTP_PROTECT_LISTEN=unix:PATH protectd removes a
// stale socket at PATH, listens there with mode 0660, believes the
// peer's X-Forwarded-For under TRUST_UNIX_SOCKET, and removes the socket
// when it stops.
func TestListenUnix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "protectd.sock")
	// A stale socket: its process is gone without removing it.
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()

	d := startDaemon(t, envListen+"=unix:"+path, "HTTP_PROTECT_TRUST_UNIX_SOCKET=true", "HTTP_PROTECT_MAX_REQUESTS=1")
	if d.addr != path {
		t.Fatalf("protectd listening on %q, want %q", d.addr, path)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != socketMode {
		t.Fatalf("os.Stat(%s) = %v, %v; want a socket of mode %v", path, fi.Mode(), err, socketMode)
	}
	c := unixClient(path)
	for i, want := range []int{200, 429} {
		req, _ := http.NewRequest("GET", "http://protectd/verify", nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != want || res.Header.Get(hdrKey) != "203.0.113.7" {
			t.Fatalf("GET /verify #%d over %s = %d, %s %q; want %d, 203.0.113.7", i+1, path, res.StatusCode, hdrKey, res.Header.Get(hdrKey), want)
		}
	}

	// A second protectd on the same socket: it is in use, and stays.
	var stderr strings.Builder
	code := run(context.Background(), nil, []string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", envListen + "=unix:" + path}, io.Discard, &stderr)
	if code != exitFailure || !strings.Contains(stderr.String(), "another process listens on it") {
		t.Fatalf("run with %s=unix:%s in use = exit %d, %q; want exit 1, another process listens on it", envListen, path, code, stderr.String())
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("os.Stat(%s) after the second protectd = %v, want the first one's socket still there", path, err)
	}

	if code := d.stop(); code != exitOK {
		t.Fatalf("d.stop() = exit %d, want 0", code)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("os.Lstat(%s) after protectd stopped = %v, want it removed", path, err)
	}
}

// TestListenUnixErrors: a relative path is a settings error, and a file
// that is not a socket is never removed.
func TestListenUnixErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		listen string
		code   int
		want   string
	}{
		{"unix:protectd.sock", exitUsage, `HTTP_PROTECT_LISTEN="unix:protectd.sock": want an absolute path`},
		{"unix:" + file, exitFailure, file + " exists and is not a socket: not removed"},
	} {
		var stderr strings.Builder
		code := run(context.Background(), nil, []string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", envListen + "=" + tc.listen}, io.Discard, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run with %s=%s = exit %d, %q; want exit %d, %q", envListen, tc.listen, code, stderr.String(), tc.code, tc.want)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep me" {
		t.Fatalf("os.ReadFile(%s) = %q, %v; want it untouched", file, b, err)
	}
}
