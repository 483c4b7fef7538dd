package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/httpprotect/protect/internal/needs"
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

// On a full disk at shutdown the bans the state file lacks are logged
// as lost, and protectd exits 1, not 0.
func TestRunStateFileFullDiskAtShutdown(t *testing.T) {
	dir := needs.Tmpfs(t, 4<<20)
	path := filepath.Join(dir, "protect.db")
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=1", "HTTP_PROTECT_BAN_LIMIT=2", "HTTP_PROTECT_STATE_FILE="+path)
	needs.Fill(t, dir)
	// A commit first reuses the pages the one before it freed, which
	// hold space on the disk already: bans enough to outgrow them.
	for i := range 200 {
		var got []int
		for range 3 {
			req, _ := http.NewRequest("GET", "http://"+d.addr+"/verify", nil)
			req.Header.Set("X-Forwarded-For", fmt.Sprintf("203.0.%d.%d", i/250, i%250+1))
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			got = append(got, res.StatusCode)
		}
		if want := []int{200, 429, 403}; !slices.Equal(got, want) {
			t.Fatalf("GET /verify ×3 for client %d = %v, want %v", i, got, want)
		}
	}
	if code := d.stop(); code != exitFailure {
		t.Errorf("d.stop() on a full disk = exit %d, want %d; log:\n%s", code, exitFailure, d.log)
	}
	// How many records are left to write depends on when the writer
	// met the full disk; the rest of the line does not.
	lines := d.log.lines(t, "store close")
	if len(lines) != 1 {
		t.Fatalf("log lines \"store close\" = %d, want 1; log:\n%s", len(lines), d.log)
	}
	delete(lines[0], "time")
	msg, _ := lines[0]["err"].(string)
	re := regexp.MustCompile(`^protect: state file ` + regexp.QuoteMeta(path) + `: [1-9][0-9]* records not written at close: write ` + regexp.QuoteMeta(path) + `: no space left on device$`)
	if len(lines[0]) != 3 || lines[0]["level"] != "ERROR" || !re.MatchString(msg) {
		t.Errorf("log line = %v, want level ERROR, msg \"store close\", err matching %s", lines[0], re)
	}
}

// A bouncer of the Local API keeps its place across a restart of
// protectd on the same HTTP_PROTECT_STATE_FILE: its first pull after the
// restart, on a new connection, carries the lift made after its last
// pull and before the restart. A bouncer that opens a connection for
// each pull gets each change in two answers (TestLAPINewConnections),
// and then nothing.
func TestRunStateFileKeepsBouncerPlaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "protect.db")
	env := []string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=1", "HTTP_PROTECT_BAN_LIMIT=2",
		"HTTP_PROTECT_STATE_FILE=" + path, envLAPIListen + "=127.0.0.1:0", envLAPIKeys + "=" + keyA,
		envAdminListen + "=127.0.0.1:0", envAdminToken + "=" + adminToken}
	d := startDaemon(t, env...)
	for range 3 {
		verifyFrom(t, d, "203.0.113.7")
	}
	if got := pullValues(t, lapiAddr(t, d), "?startup=true", keyA); !got.is(nil, []string{"203.0.113.7"}) {
		t.Fatalf("startup pull = %+v, want 203.0.113.7 new", got)
	}
	lift := "http://" + adminAddr(t, d) + "/v1/bans?target=203.0.113.7"
	if code, body := adminDo(t, http.DefaultClient, "DELETE", lift, "Bearer "+adminToken); code != 200 {
		t.Fatalf("DELETE %s = %d %s, want 200", lift, code, body)
	}
	if code := d.stop(); code != exitOK {
		t.Fatalf("d.stop() = exit %d, want 0; log:\n%s", code, d.log)
	}

	d = startDaemon(t, env...)
	for i, want := range [][]string{{"203.0.113.7"}, {"203.0.113.7"}, nil} {
		if got := pullValues(t, lapiAddr(t, d), "", keyA); !got.is(want, nil) {
			t.Errorf("pull %d after the restart = %+v, want deleted %q; log:\n%s", i+1, got, want, d.log)
		}
	}
}
