package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect/admin"
)

// startProtectd builds protectd and runs it on the memory store with env,
// on loopback ports it picks, until the test ends; it returns the
// address of /verify and of the admin API.
func startProtectd(t *testing.T, env ...string) (verify, adminAddr string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "protectd")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "../protectd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ../protectd: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"HTTP_PROTECT_LISTEN=127.0.0.1:0", "HOME=/nonexistent"}, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := make(chan [2]string, 1)
	go func() {
		var addrs [2]string
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch line.Msg {
			case "listening":
				addrs[0] = line.Addr
			case "admin API listening":
				addrs[1] = line.Addr
			}
			if addrs[0] != "" && addrs[1] != "" {
				found <- addrs
				break
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case a := <-found:
		return a[0], a[1]
	case <-time.After(20 * time.Second):
		t.Fatal("protectd: no listening lines within 20s")
	}
	return "", ""
}

// protectctl -server against a protectd on the memory store, over TCP
// with its token: it lists a ban that /verify made, inspects it, lifts
// it, and the next /verify is served. Without the token it fails, exit 1,
// saying to check it.
func TestServerAgainstProtectd(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	verify, adminAddr := startProtectd(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=1", "HTTP_PROTECT_BAN_LIMIT=2",
		"HTTP_PROTECT_ADMIN_LISTEN=127.0.0.1:0", "HTTP_PROTECT_ADMIN_TOKEN="+token)
	ask := func() int {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://"+verify+"/verify", nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for range 3 {
		ask()
	}
	if code := ask(); code != 403 {
		t.Fatalf("/verify for 203.0.113.7 past its ban limit = %d, want 403", code)
	}
	url := "http://" + adminAddr
	if code, out, errs := ctlServer(t, url, "bans"); code != 1 || out != "" || !strings.Contains(errs, "-token") {
		t.Fatalf("protectctl -server %s bans without the token = exit %d, stdout %q, stderr %q; want exit 1 saying check -token", url, code, out, errs)
	}
	t.Setenv("HTTP_PROTECT_ADMIN_TOKEN", token)
	args := []string{"bans", "-json"}
	code, out, errs := ctlServer(t, url, args...)
	recs := decode[[]admin.BanRecord](t, args, out)
	if code != 0 || len(recs) != 1 || recs[0].Key != "203.0.113.7" || recs[0].Reason != "stream passed the ban limit of 2 requests" {
		t.Fatalf("protectctl -server %s bans -json = exit %d %+v %s, want the ban of 203.0.113.7", url, code, recs, errs)
	}
	if code, out, _ := ctlServer(t, url, "inspect", "203.0.113.7"); code != 0 || !strings.Contains(out, "ban       stream passed the ban limit of 2 requests") ||
		!strings.Contains(out, "0 of 1 (ban past 2)") {
		t.Fatalf("protectctl -server %s inspect 203.0.113.7 = exit %d\n%s\nwant its ban and the service's limits, 0 of 1 (ban past 2)", url, code, out)
	}
	if code, _, _ := ctlServer(t, url, "check", "203.0.113.7"); code != 1 {
		t.Fatalf("protectctl -server %s check 203.0.113.7 = exit %d, want 1: banned", url, code)
	}
	// -token wins over the environment.
	if code, _, errs := ctlServer(t, url, "-token", "wrong-wrong-wrong-wrong", "bans"); code != 1 || !strings.Contains(errs, "missing or wrong bearer token") {
		t.Fatalf("protectctl -server %s -token wrong… bans = exit %d %s, want exit 1, wrong token", url, code, errs)
	}
	if code, out, errs := ctlServer(t, url, "lift", "-by", "alice@ops", "203.0.113.7"); code != 0 || !strings.Contains(out, "203.0.113.7") {
		t.Fatalf("protectctl -server %s lift 203.0.113.7 = exit %d\n%s%s\nwant exit 0 naming it", url, code, out, errs)
	}
	if code := ask(); code != 200 {
		t.Fatalf("/verify for 203.0.113.7 right after the lift = %d, want 200", code)
	}
	if code, _, _ := ctlServer(t, url, "check", "203.0.113.7"); code != 0 {
		t.Fatalf("protectctl -server %s check 203.0.113.7 after the lift = exit %d, want 0", url, code)
	}
	// HTTP_PROTECT_ADMIN_URL stands for -server.
	t.Setenv("HTTP_PROTECT_ADMIN_URL", url)
	var o, e strings.Builder
	if code := run([]string{"bans", "-json"}, &o, &e); code != 0 || strings.TrimSpace(o.String()) != "[]" {
		t.Fatalf("protectctl bans -json with HTTP_PROTECT_ADMIN_URL = exit %d %q %s, want exit 0, []", code, o.String(), e.String())
	}
}

// An admin URL that nothing serves fails fast, exit 1, naming it.
func TestServerUnreachable(t *testing.T) {
	for _, url := range []string{"http://127.0.0.1:1", "unix:" + filepath.Join(t.TempDir(), "none.sock")} {
		code, out, errs := ctlServer(t, url, "bans")
		if code != 1 || out != "" || !strings.Contains(errs, url) || !strings.Contains(errs, "check -server") {
			t.Errorf("protectctl -server %s bans = exit %d, stdout %q, stderr %q; want exit 1 naming it", url, code, out, errs)
		}
	}
	for _, url := range []string{"ftp://x", "unix:", "127.0.0.1:8090"} {
		if code, _, errs := ctlServer(t, url, "bans"); code != 2 || !strings.Contains(errs, url) {
			t.Errorf("protectctl -server %s bans = exit %d, stderr %q; want exit 2 quoting it", url, code, errs)
		}
	}
	if code, _, errs := ctlServer(t, "http://127.0.0.1:1", "-redis", "redis://127.0.0.1:1", "bans"); code != 2 || !strings.Contains(errs, "exclude") {
		t.Errorf("protectctl -server … -redis … bans = exit %d %s, want exit 2: they exclude each other", code, errs)
	}
}
