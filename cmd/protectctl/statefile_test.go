package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// protectctl in the environment of a service with a state file says the
// file is the service's, and never opens (or makes) it.
func TestStateFileNotOpened(t *testing.T) {
	path := filepath.Join(t.TempDir(), "protect.db")
	t.Setenv("HTTP_PROTECT_REDIS_URL", "")
	t.Setenv("HTTP_PROTECT_STATE_FILE", path)
	var out, errb strings.Builder
	code := run([]string{"bans"}, &out, &errb)
	if code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "HTTP_PROTECT_STATE_FILE="+path) ||
		!strings.Contains(errb.String(), "held locked by the running service") || !strings.Contains(errb.String(), "does not open it") {
		t.Errorf("protectctl bans with HTTP_PROTECT_STATE_FILE = exit %d, stdout %q, stderr %q; want exit 2 saying the running service holds the file", code, out.String(), errb.String())
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state file after protectctl: Stat = %v, want it never made", err)
	}
}
