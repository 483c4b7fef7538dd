package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The bookmarks of a ban namespace's journal (store.Bookmarks): a map in
// memory, written to the state file when there is one, as the journal is
// (durablejournal.go): a bookmark set is noted for the writer, and comes
// back at open with its expiry.

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
	_, err := sp.saveBookmark(ctx, name, nil, text, ttl)
	return err
}

// SwapBookmark implements store.Bookmarks.
func (sp *memSpace) SwapBookmark(ctx context.Context, name, old, text string, ttl time.Duration) (bool, error) {
	return sp.saveBookmark(ctx, name, &old, text, ttl)
}

// saveBookmark saves text under name for ttl if name holds *old, or
// whatever it holds when old is nil.
func (sp *memSpace) saveBookmark(ctx context.Context, name string, old *string, text string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if ttl < time.Second {
		return false, fmt.Errorf("protect: bookmark %q: ttl %v, want at least 1s", name, ttl)
	}
	now := sp.s.now()
	b := &sp.bns.marks
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]bookmark{}
	}
	held, ok := b.m[name]
	if ok && held.expires <= now {
		held, ok = bookmark{}, false
	}
	if old != nil && held.text != *old {
		return false, nil
	}
	if !ok && len(b.m) >= maxBookmarks {
		for k, m := range b.m { // make room from those past their ttl
			if m.expires <= now {
				delete(b.m, k)
			}
		}
		if len(b.m) >= maxBookmarks {
			return false, fmt.Errorf("protect: bookmark %q: %d bookmarks kept, the most there may be", name, maxBookmarks)
		}
	}
	b.m[name] = bookmark{text: text, expires: now + int64(ttl)}
	sp.s.journal.noteMark(sp.bns.id, name)
	return true, nil
}
