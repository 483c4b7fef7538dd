package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The bookmarks of a ban namespace's journal (store.Bookmarks): a map in
// memory, as the journal itself is, and not in the state file: a cursor
// names an event of this process's journal, which a restart does not
// keep, so a bookmark kept across it would name nothing.

// maxBookmarks bounds a namespace's bookmarks; past it, a new name is
// refused rather than an old one forgotten.
const maxBookmarks = 100_000

// bookmarks is one namespace's map of bookmarks. The zero value is empty.
type bookmarks struct {
	mu sync.Mutex
	m  map[string]bookmark
}

type bookmark struct {
	text    string
	expires int64 // ticks of the store's clock
}

// Bookmark implements store.Bookmarks.
func (sp *memSpace) Bookmark(ctx context.Context, name string) (string, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	b := &sp.bns.marks
	b.mu.Lock()
	defer b.mu.Unlock()
	m, ok := b.m[name]
	if !ok || m.expires <= sp.s.now() {
		return "", false, nil
	}
	return m.text, true, nil
}

// SetBookmark implements store.Bookmarks.
func (sp *memSpace) SetBookmark(ctx context.Context, name, text string, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ttl < time.Second {
		return fmt.Errorf("protect: bookmark %q: ttl %v, want at least 1s", name, ttl)
	}
	now := sp.s.now()
	b := &sp.bns.marks
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]bookmark{}
	}
	if _, ok := b.m[name]; !ok && len(b.m) >= maxBookmarks {
		for k, m := range b.m { // make room from those past their ttl
			if m.expires <= now {
				delete(b.m, k)
			}
		}
		if len(b.m) >= maxBookmarks {
			return fmt.Errorf("protect: bookmark %q: %d bookmarks kept, the most there may be", name, maxBookmarks)
		}
	}
	b.m[name] = bookmark{text: text, expires: now + int64(ttl)}
	return nil
}
