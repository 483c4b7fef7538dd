package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"

	"github.com/httpprotect/protect/store"
	"github.com/redis/go-redis/v9"
)

// Damaged ban records. Anyone who can write to the Redis can write a key
// ban record that decodeBan cannot read ("SET protect:{198.51.100.7}:b
// garbage"). That is damage to one client's record, not a failure of the
// store (protect.ErrMalformed): the request is decided as if the record
// were absent, and the error reports it beside the result.
//
// Go decides what is readable, so the scripts cannot tell a damaged
// record from a ban by themselves. The first request that meets one
// reads it, fails to decode it, and asks again with the record's SHA-1,
// which the script then ignores (damaged in lua/prelude.lua): two round
// trips, once, and a third that adds the key to the ban index (index.go)
// if it is not there, so that protectctl bans lists the damaged record
// for an operator to lift: a record written by hand is in no index, and a
// listing never scans. The store remembers the SHA-1, so every later request of
// that key is one round trip again, and still atomic: if anyone replaces
// the record meanwhile, by a ban or a lift, the script sees another
// record, and answers it.

// damages is what the store remembers of the damaged records it met.
type damages struct {
	max int          // MaxCachedBans: each map is bounded as the ban cache is
	log *slog.Logger // where logOnce reports

	mu sync.Mutex // guards byKey and logged
	// byKey: the damaged key ban records seen; n is its length, read
	// without the lock.
	byKey map[cacheKey]*damage
	n     atomic.Int64
	// logged: the damaged range records logged (logOnce).
	logged map[string]struct{}
}

// damage is what the store remembers of one damaged record.
type damage struct {
	sha string                // the record's SHA-1, in hex
	err *store.MalformedError // what the take reports with its result
}

// damaged returns the damage remembered for k in ns, or nil.
func (d *damages) damaged(ns *redisNamespace, k store.Key) *damage {
	if d.n.Load() == 0 { // the common case: no damage seen
		return nil
	}
	d.mu.Lock()
	dmg := d.byKey[cacheKey{ns, k}]
	d.mu.Unlock()
	return dmg
}

// remember remembers the record rec at Redis key rk, of k in ns, that
// did not decode with err, and returns it.
func (d *damages) remember(ns *redisNamespace, k store.Key, rk, rec string, err error) *damage {
	sum := sha1.Sum([]byte(rec))
	dmg := &damage{sha: hex.EncodeToString(sum[:]), err: &store.MalformedError{Key: rk, Record: store.QuoteMalformed(rec), Err: err}}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byKey == nil || len(d.byKey) >= d.max {
		d.byKey = make(map[cacheKey]*damage) // forgetting costs one more round trip, once
	}
	d.byKey[cacheKey{ns, k}] = dmg
	d.n.Store(int64(len(d.byKey)))
	return dmg
}

// forget drops what the store remembers of k's record: it is gone, or
// replaced.
func (d *damages) forget(ns *redisNamespace, k store.Key) {
	d.mu.Lock()
	delete(d.byKey, cacheKey{ns, k})
	d.n.Store(int64(len(d.byKey)))
	d.mu.Unlock()
}

// logOnce logs a damaged record of the hash at key, field field, once
// per process (the range bans are re-read every RangeRefresh: a line
// each time would be a line a second). The memory is bounded as the ban
// cache is.
func (d *damages) logOnce(key, field, msg string, args ...any) {
	id := key + "\x00" + field
	d.mu.Lock()
	_, seen := d.logged[id]
	if !seen {
		if d.logged == nil || len(d.logged) >= d.max {
			d.logged = make(map[string]struct{})
		}
		d.logged[id] = struct{}{}
	}
	d.mu.Unlock()
	if !seen {
		d.log.Error(msg, args...)
	}
}

// pttlOf is the milliseconds left of a PTTL reply, -1 for a key that
// never expires; 0 when the reply is lost (its GET says what is there).
func pttlOf(c redis.Cmder) int64 {
	d, err := c.(*redis.DurationCmd).Result()
	switch {
	case err != nil:
		return 0
	case d == -1:
		return -1
	}
	return d.Milliseconds()
}

// unbanned reads lua/unban.lua's reply {record, ms left}: the ban lifted,
// or a Ban that says the record lifted was damaged.
func unbanned(k store.Key, v []any) store.Ban {
	var rec string
	var left int64
	if len(v) == 2 {
		rec = str(v[0])
		left, _ = toInt(v[1])
	}
	return readBan(k, false, rec, left)
}

// indexDamage adds k, whose ban record in ns is damaged, to its ban index
// when it is not there (a record written by hand), scored as a permanent
// ban: listings show it until it is lifted. A failure is only logged: the
// request is decided all the same.
func (s *Store) indexDamage(ctx context.Context, ns *redisNamespace, k store.Key) {
	err := s.client.ZAddNX(ctx, s.indexKey(ns.name, k), redis.Z{Score: math.Inf(1), Member: k.String()}).Err()
	if err != nil {
		s.log.Warn("protect: cannot add a damaged ban record to the ban index; protectctl bans may not list it", "key", k.String(), "error", err)
	}
}
