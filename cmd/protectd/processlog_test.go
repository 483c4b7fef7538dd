package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/httpprotect/protect/internal/needs"
)

// jsonLines parses every line of out as a JSON log line and returns
// their msg fields, in order; a line that is not JSON fails the test.
func jsonLines(t *testing.T, what, out string) []string {
	t.Helper()
	var msgs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Errorf("%s: stderr line %q is not JSON (%v), want every line in the log's format; stderr:\n%s", what, sc.Text(), err, out)
			continue
		}
		msg, _ := m["msg"].(string)
		msgs = append(msgs, msg)
	}
	return msgs
}

// TestRunLogIsJSON: every line protectd prints while it runs is JSON,
// the state file's and go-redis's and the log package's included.
func TestRunLogIsJSON(t *testing.T) {
	redisAddr := needs.Env(t, "PROTECT_REDIS_ADDR", "a Redis for the tests; .ci/parts start one")
	for _, tc := range []struct {
		name string
		env  func(dir string) []string
		// want are msgs that must be there (in this order), beside others.
		want []string
	}{
		{"state file", func(dir string) []string {
			return []string{"HTTP_PROTECT_STATE_FILE=" + filepath.Join(dir, "state.db")}
		},
			[]string{"protect: state restored", "store", "listening", "std log line", "shutting down"}},
		{"closed redis port", func(string) []string { return []string{"HTTP_PROTECT_REDIS_URL=redis://127.0.0.1:1/0"} },
			[]string{"redis", "store unreachable at start: decisions follow HTTP_PROTECT_ON_STORE_ERROR until it answers", "listening", "std log line", "shutting down"}},
		{"real redis", func(string) []string { return []string{"HTTP_PROTECT_REDIS_URL=redis://" + redisAddr + "/0"} },
			[]string{"store", "listening", "std log line", "shutting down"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDaemon(t, append([]string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1"}, tc.env(t.TempDir())...)...)
			log.Print("std log line") // the log package's default logger, as a dependency would use it
			if code := d.stop(); code != exitOK {
				t.Fatalf("stop() = exit %d, want 0; log:\n%s", code, d.log)
			}
			msgs := jsonLines(t, tc.name, d.log.String())
			i := 0
			for _, m := range msgs {
				if i < len(tc.want) && m == tc.want[i] {
					i++
				}
			}
			if i < len(tc.want) {
				t.Errorf("log msgs = %q, want %q among them, in order", msgs, tc.want)
			}
			if tc.name == "closed redis port" {
				for _, l := range d.log.lines(t, "redis") {
					if line, _ := l["line"].(string); !strings.HasPrefix(line, "connection pool: failed to dial") || l["level"] != "WARN" {
						t.Errorf("go-redis line = %v, want level WARN, line \"connection pool: failed to dial…\"", l)
					}
				}
			}
		})
	}
}

// TestRunCheckMistakes: -check says each mistake on a line of its own,
// every mistake of a run at once, under the variables' names, and prints
// no go-redis line nor a "last good set" warning.
func TestRunCheckMistakes(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.txt")
	const badURL = `protectd: protect: bad config: HTTP_PROTECT_REDIS_URL: protect: redis URL: not a Redis URL: want redis://[user:password@]host:port/db, rediss://…, unix://…, redis+cluster://host:port,host:port or redis+sentinel://host:port,host:port/MASTER`
	const badTTL = `protect: bad config: HTTP_PROTECT_TTL="0": 0 is not a duration this setting can have: unset it for the default`
	noList := `HTTP_PROTECT_BLOCKLISTS="` + missing + `": list "missing": stat ` + missing + `: no such file or directory`
	state := filepath.Join(dir, "state.db")
	for _, tc := range []struct {
		name   string
		env    []string
		code   int
		stdout string // its last line
		errs   []string
	}{
		{"bad url", []string{"HTTP_PROTECT_REDIS_URL=http://x"}, exitUsage, "", []string{badURL}},
		{"bad ttl", []string{"HTTP_PROTECT_TTL=0"}, exitUsage, "", []string{"protectd: " + badTTL}},
		{"missing list", []string{"HTTP_PROTECT_BLOCKLISTS=" + missing}, exitUsage, "", []string{"protectd: " + noList}},
		{"all three", []string{"HTTP_PROTECT_REDIS_URL=http://x", "HTTP_PROTECT_TTL=0", "HTTP_PROTECT_BLOCKLISTS=" + missing}, exitUsage, "",
			[]string{"protectd: " + badTTL, strings.TrimPrefix(badURL, "protectd: "), noList}},
		{"dead redis", []string{"HTTP_PROTECT_REDIS_URL=redis://127.0.0.1:1/0"}, exitFailure, "",
			[]string{"protectd: redis at 127.0.0.1:1 does not answer: connection refused"}},
		{"state file", []string{"HTTP_PROTECT_STATE_FILE=" + state}, exitOK, "store: memory, state file " + state, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"-check"}, append([]string{trusted}, tc.env...), &stdout, &stderr)
			var text []string
			for line := range strings.Lines(stderr.String()) {
				line = strings.TrimSuffix(line, "\n")
				var m map[string]any
				if json.Unmarshal([]byte(line), &m) == nil {
					if msg, _ := m["msg"].(string); msg == "redis" || strings.Contains(msg, "last good set") {
						t.Errorf("protectd -check with %q: log line %s, want none such", tc.env, line)
					}
					continue
				}
				text = append(text, line)
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			if code != tc.code || !slices.Equal(text, tc.errs) || tc.stdout != "" && lines[len(lines)-1] != tc.stdout {
				t.Errorf("protectd -check with %q = exit %d, stdout %q, stderr lines\n%q\nwant exit %d, stdout ending %q, stderr lines\n%q",
					tc.env, code, stdout.String(), text, tc.code, tc.stdout, tc.errs)
			}
		})
	}
}
