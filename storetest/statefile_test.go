package storetest_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/testclock"
	"github.com/httpprotect/protect/store"
	"github.com/httpprotect/protect/storetest"
)

// TestMemoryStoreStateFile runs the suite on a memory store that keeps
// its state in a file: the file changes nothing the store answers.
func TestMemoryStoreStateFile(t *testing.T) {
	storetest.RunEnv(t, func(t *testing.T) storetest.Env {
		clk := testclock.At(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
		opt := protect.MemoryOptions{
			Path: filepath.Join(t.TempDir(), "protect.db"), Clock: clk.Now, SweepInterval: -1, Logger: discard,
		}
		s, err := protect.OpenMemoryStore(opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		reopen := func(t *testing.T) store.Store {
			t.Helper()
			if err := s.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}
			if s, err = protect.OpenMemoryStore(opt); err != nil {
				t.Fatalf("OpenMemoryStore after Close = %v", err)
			}
			return s
		}
		return storetest.Env{Store: s, Wait: clk.Advance, Now: clk.Now, Reopen: reopen}
	})
}
