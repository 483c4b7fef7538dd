package main

import (
	"context"
	"strings"
	"testing"

	"github.com/httpprotect/protect/internal/redistest"
)

const setupMsg = "protect: store setup puts bans at risk"

// A Redis whose eviction policy can evict bans is warned of, in a log
// line that says what is lost and how to fix it, at start and in -check;
// one that refuses CONFIG is said not checked, at info level, and
// protectd runs all the same.
func TestSetupWarnings(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes")
	srv.Do("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
	env := []string{trusted, "HTTP_PROTECT_REDIS_URL=redis://" + srv.Addr + "/0"}
	want := func(where string, logs *logBuffer) {
		t.Helper()
		lines := logs.lines(t, setupMsg)
		if len(lines) != 1 || lines[0]["level"] != "WARN" || lines[0]["setting"] != "maxmemory-policy" || lines[0]["value"] != "allkeys-lru" || lines[0]["server"] != srv.Addr ||
			!strings.Contains(lines[0]["risk"].(string), "permanent ones too") || !strings.Contains(lines[0]["fix"].(string), "noeviction") {
			t.Fatalf("%s: log lines %q = %v; want one warning of allkeys-lru, server %s, what it evicts and noeviction as the fix; log:\n%s", where, setupMsg, lines, srv.Addr, logs)
		}
	}
	logs := &logBuffer{}
	var out strings.Builder
	if code := run(context.Background(), []string{"-check"}, env, &out, logs); code != exitOK {
		t.Fatalf("protectd -check = exit %d, want 0; log:\n%s", code, logs)
	}
	want("protectd -check", logs)
	d := startDaemon(t, env...)
	want("protectd at start", d.log)

	refused := redistest.Start(t, "--rename-command", "CONFIG", "")
	logs = &logBuffer{}
	if code := run(context.Background(), []string{"-check"}, []string{trusted, "HTTP_PROTECT_REDIS_URL=redis://" + refused.Addr + "/0"}, &out, logs); code != exitOK {
		t.Fatalf("protectd -check on a server refusing CONFIG = exit %d, want 0; log:\n%s", code, logs)
	}
	if lines := logs.lines(t, "protect: store setup not checked"); len(lines) != 1 || lines[0]["level"] != "INFO" || !strings.Contains(lines[0]["error"].(string), "cannot check") {
		t.Fatalf("protectd -check on a server refusing CONFIG: %v; want one info line saying it cannot check; log:\n%s", lines, logs)
	}
}
