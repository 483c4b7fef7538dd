package envconfig

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	protect "github.com/httpprotect/protect"
)

func TestStateFileOpensMemoryStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "protect.db")
	opts := Options{Memory: protect.MemoryOptions{Logger: slog.New(slog.DiscardHandler)}}
	c, err := Read([]string{"HTTP_PROTECT_STATE_FILE=" + path}, opts)
	if err != nil {
		t.Fatalf("Read(STATE_FILE=%s) = %v, want a config", path, err)
	}
	store, ok := c.Store.(*protect.MemoryStore)
	if !ok {
		t.Fatalf("Read(STATE_FILE=%s).Store = %T, want a *protect.MemoryStore", path, c.Store)
	}
	t.Cleanup(func() { store.Close() })

	// The file is held: a second reader (a second process, or protectctl)
	// is told so, under the variable's name.
	_, err = Read([]string{"HTTP_PROTECT_STATE_FILE=" + path}, opts)
	if !errors.Is(err, protect.ErrStateFileLocked) || !errors.Is(err, protect.ErrConfig) ||
		!strings.Contains(err.Error(), "HTTP_PROTECT_STATE_FILE") || !strings.Contains(err.Error(), path) {
		t.Errorf("Read(STATE_FILE=%s) while held = %v, want ErrStateFileLocked naming the variable and the file", path, err)
	}
}

func TestStateFileAndRedisURL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "protect.db")
	for _, tc := range []struct {
		name string
		env  []string
		opts Options
	}{
		{"variables", []string{"HTTP_PROTECT_STATE_FILE=" + path, "HTTP_PROTECT_REDIS_URL=redis://127.0.0.1:6379"}, Options{}},
		{"flag", []string{"HTTP_PROTECT_STATE_FILE=" + path}, Options{RedisURL: "redis://127.0.0.1:6379"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Read(tc.env, tc.opts)
			if c.Store != nil {
				c.Store.Close()
			}
			if !errors.Is(err, protect.ErrConfig) || !strings.Contains(err.Error(), "HTTP_PROTECT_STATE_FILE") || !strings.Contains(err.Error(), "HTTP_PROTECT_REDIS_URL") {
				t.Errorf("Read(both) = %v, want an error naming HTTP_PROTECT_STATE_FILE and HTTP_PROTECT_REDIS_URL", err)
			}
		})
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state file after a refused config: Stat = %v, want it never made", err)
	}
}
