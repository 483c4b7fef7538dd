package main

import (
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A client protectd banned stays banned when protectd restarts on the
// same HTTP_PROTECT_STATE_FILE, and a second protectd on that file while
// the first runs refuses to start, naming it.
func TestRunStateFileKeepsBans(t *testing.T) {
	path := filepath.Join(t.TempDir(), "protect.db")
	env := []string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=1", "HTTP_PROTECT_BAN_LIMIT=2", "HTTP_PROTECT_STATE_FILE=" + path}
	verify := func(d *daemon) int {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+d.addr+"/verify", nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	d := startDaemon(t, env...)
	var got []int
	for range 4 {
		got = append(got, verify(d))
	}
	if want := []int{200, 429, 403, 403}; !slices.Equal(got, want) {
		t.Fatalf("GET /verify ×4 = %v, want %v", got, want)
	}
	var errb logBuffer
	if code := run(t.Context(), nil, append([]string{envListen + "=127.0.0.1:0"}, env...), &logBuffer{}, &errb); code != exitUsage {
		t.Errorf("a second protectd on %s = exit %d, want %d; stderr:\n%s", path, code, exitUsage, errb.String())
	} else if s := errb.String(); !strings.Contains(s, "HTTP_PROTECT_STATE_FILE") || !strings.Contains(s, path) || !strings.Contains(s, "another process") {
		t.Errorf("a second protectd on %s: stderr %q, want the variable, the file and that another process holds it", path, s)
	}
	if code := d.stop(); code != exitOK {
		t.Fatalf("d.stop() = exit %d, want 0; log:\n%s", code, d.log)
	}
	d = startDaemon(t, env...)
	if code := verify(d); code != 403 {
		t.Errorf("GET /verify after the restart = %d, want 403: the ban is kept", code)
	}
}
