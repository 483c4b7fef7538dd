package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The bookmarks of a ban namespace's journal (store.Bookmarks): one
// string each, <bns>mark:<name>, which Redis ends after its ttl. Every
// instance on the store reads and writes the same, so a reader (a
// CrowdSec bouncer's feed) goes on at any instance where it left off.

func markKey(bns, name string) string { return bns + "mark:" + name }

// Bookmark implements store.Bookmarks.
func (sp *redisSpace) Bookmark(ctx context.Context, name string) (string, bool, error) {
	text, err := sp.s.client.Get(ctx, markKey(sp.bns.name, name)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("protect: redis bookmark %q: %w", name, err)
	}
	return text, true, nil
}

// SetBookmark implements store.Bookmarks.
func (sp *redisSpace) SetBookmark(ctx context.Context, name, text string, ttl time.Duration) error {
	if ttl < time.Second {
		return fmt.Errorf("protect: redis bookmark %q: ttl %v, want at least 1s", name, ttl)
	}
	if err := sp.s.client.Set(ctx, markKey(sp.bns.name, name), text, ttl).Err(); err != nil {
		return fmt.Errorf("protect: redis bookmark %q: %w", name, err)
	}
	return nil
}
