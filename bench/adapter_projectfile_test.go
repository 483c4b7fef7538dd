package bench

// The project on its memory store with a state file: the request path must
// be the memory store's, file or no file.

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"

	protect "github.com/httpprotect/protect"
)

type projectFileAdapter struct {
	projectAdapter
	store *protect.MemoryStore
	dir   string
}

func (a *projectFileAdapter) Close() error {
	return errors.Join(a.p.Close(), a.store.Close(), os.RemoveAll(a.dir))
}

func newProjectFile(p Policy) (*projectFileAdapter, error) {
	dir, err := os.MkdirTemp("", "protect-bench-")
	if err != nil {
		return nil, err
	}
	store, err := protect.OpenMemoryStore(protect.MemoryOptions{Path: filepath.Join(dir, "protect.db"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cfg := projectConfig(p)
	cfg.Store = store
	pr, err := protect.New(cfg)
	if err != nil {
		store.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return &projectFileAdapter{projectAdapter: projectAdapter{p: pr}, store: store, dir: dir}, nil
}

func init() {
	RegisterMemory(MemoryPeer{Name: "project-file", Rank: RankProject, Note: "protect, in-memory store with a state file",
		New: func(p Policy) (Limiter, error) { return newProjectFile(p) }})
}
