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

// swapBookmarkScript sets KEYS[1] to ARGV[2] for ARGV[3] ms if it holds
// ARGV[1] ("" for nothing): a GET and a SET that no other client's
// command comes between.
var swapBookmarkScript = redis.NewScript(`
if (redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1`)

// SwapBookmark implements store.Bookmarks.
func (sp *redisSpace) SwapBookmark(ctx context.Context, name, old, text string, ttl time.Duration) (bool, error) {
	if ttl < time.Second {
		return false, fmt.Errorf("protect: redis bookmark %q: ttl %v, want at least 1s", name, ttl)
	}
	n, err := swapBookmarkScript.Run(ctx, sp.s.client, []string{markKey(sp.bns.name, name)}, old, text, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("protect: redis bookmark %q: %w", name, err)
	}
	return n == 1, nil
}
