package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/httpprotect/protect/store"
	"github.com/redis/go-redis/v9"
)

// The index of key bans. Listing bans must not SCAN a shared Redis that
// may hold millions of keys, so every script that writes a key ban
// (put_ban in lua/prelude.lua) also adds its key to a sorted set scored
// by the ban's expiry in ms (+inf: permanent), in the same atomic step;
// unban.lua removes it with the ban. A ban that expires leaves its entry
// behind until a listing, or the next ban written to the same index,
// prunes the entries of bans that ended over a minute ago.
//
// The index must sit in the slot of every ban it holds, for the script
// that writes both to be legal on Redis Cluster. So on a single node (and
// on each shard of a Ring, where a script writes on the shard of its first
// key) there is one index per ban namespace, <bns>bans; on Redis Cluster
// one per slot, <bns>{<tag>}:bans, where <tag> is a short string that
// hashes to the slot (slotTags). A listing reads them all in pages, each
// page under its own deadline.

// banPage is how many bans one page of a listing reads: one pipelined
// round trip of this many GETs.
const banPage = 1000

// clusterSlots is the number of hash slots of Redis Cluster.
const clusterSlots = 16384

// indexKey returns the index that holds k's ban in ban namespace bns.
func (s *Store) indexKey(bns string, k store.Key) string {
	if !s.topo.isCluster() {
		return bns + "bans"
	}
	var kb [64]byte
	ks, _ := k.AppendText(kb[:0])
	return slotIndexKey(bns, keySlot(ks))
}

func slotIndexKey(bns string, slot int) string {
	return bns + "{" + slotTags()[slot] + "}:bans"
}

// keySlot is the cluster slot of a key whose hash tag is tag: CRC16
// (XMODEM) of the tag, modulo 16384.
func keySlot(tag []byte) int {
	var crc uint16
	for _, b := range tag {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

// slotTags returns, for each cluster slot, the shortest base-36 number
// (the first found) that hashes to it: about 170,000 hashes, once per
// process that uses a cluster.
var slotTags = sync.OnceValue(func() []string {
	tags := make([]string, clusterSlots)
	for i, left := 0, clusterSlots; left > 0; i++ {
		tag := strconv.FormatInt(int64(i), 36)
		if slot := keySlot([]byte(tag)); tags[slot] == "" {
			tags[slot] = tag
			left--
		}
	}
	return tags
})

// indexNodes calls fn for each place a ban namespace's indexes live: on
// a Cluster, the cluster client (it routes each index to its slot's
// master) with every slot's index; on a Ring, each shard with its own
// <bns>bans; else the client with <bns>bans.
func (s *Store) indexNodes(ctx context.Context, bns string, fn func(ctx context.Context, c redis.Cmdable, indexes []string) error) error {
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		indexes := make([]string, clusterSlots)
		for slot := range indexes {
			indexes[slot] = slotIndexKey(bns, slot)
		}
		return fn(ctx, c, indexes)
	case *redis.Ring:
		return c.ForEachShard(ctx, func(ctx context.Context, shard *redis.Client) error {
			return fn(ctx, shard, []string{bns + "bans"})
		})
	}
	return fn(ctx, s.client, []string{bns + "bans"})
}

// pageContext bounds one page of a listing: perPage when positive, else
// only ctx.
func pageContext(ctx context.Context, perPage time.Duration) (context.Context, context.CancelFunc) {
	if perPage <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, perPage)
}

// indexCursor is where a listing stands in one index: it has read every
// entry scored below min, and skip entries scored min.
type indexCursor struct {
	index string
	min   float64
	skip  int64
	left  int64 // entries not read yet, as counted when the listing began
}

// listKeyBans reads every key ban of the namespace from its indexes, in
// pages of about banPage bans, each page under a deadline of perPage,
// and passes those f selects to keep, which the shards of a Ring call at
// once. Entries of bans that expired are
// pruned on the way; entries whose ban is gone (lifted by hand, or
// expired within the page) are skipped.
func (sp *redisSpace) listKeyBans(ctx context.Context, f store.BanFilter, perPage time.Duration, keep func(store.Ban)) error {
	s := sp.s
	bns := sp.bns.name
	return s.indexNodes(ctx, bns, func(ctx context.Context, c redis.Cmdable, indexes []string) error {
		// Sweep and count every index, a page of indexes at a time: the
		// bans that ended are journaled over and leave (sweep.lua, by
		// each index's own master's clock, so none leaves early).
		var cursors []*indexCursor
		if cc, ok := c.(*redis.ClusterClient); ok {
			var err error
			cursors, err = sp.sweepMasters(ctx, cc, perPage)
			if err == nil {
				indexes = nil // swept and counted
			} else if !isReply(err) || !strings.Contains(err.Error(), "flag") { // before Redis 7: one script a slot
				return fmt.Errorf("protect: redis ban index: %w", err)
			}
		}
		for start := 0; start < len(indexes); start += banPage {
			chunk := indexes[start:min(start+banPage, len(indexes))]
			pctx, cancel := pageContext(ctx, perPage)
			keys, args := make([][]string, len(chunk)), make([][]any, len(chunk))
			for i, idx := range chunk {
				keys[i], args[i] = []string{idx}, []any{s.journal}
			}
			cmds, err := evalEach(pctx, c, sweepScript, keys, args)
			for i := 0; err == nil && i < len(cmds); i++ {
				err = cmds[i].Err()
			}
			cancel()
			if err != nil {
				return fmt.Errorf("protect: redis ban index: %w", err)
			}
			for i, idx := range chunk {
				if n, _ := cmds[i].(*redis.Cmd).Int64(); n > 0 {
					cursors = append(cursors, &indexCursor{index: idx, min: -1, left: n})
				}
			}
		}
		// Read the entries, and the bans they name, a page at a time: a
		// page takes whole small indexes, or part of a large one.
		for len(cursors) > 0 {
			var batch []*indexCursor
			total := int64(0)
			for len(cursors) > 0 && (len(batch) == 0 || total+cursors[0].left <= banPage) {
				total += min(cursors[0].left, banPage)
				batch, cursors = append(batch, cursors[0]), cursors[1:]
			}
			more, err := sp.readPage(ctx, c, batch, f, perPage, keep)
			if err != nil {
				return err
			}
			cursors = append(more, cursors...)
		}
		return nil
	})
}

// sweepMasters sweeps and counts every slot's index of a Cluster with
// one sweepall.lua a range of slots of a master, under one deadline of
// perPage, and returns a cursor for each index that holds entries.
func (sp *redisSpace) sweepMasters(ctx context.Context, c *redis.ClusterClient, perPage time.Duration) ([]*indexCursor, error) {
	s := sp.s
	ctx, cancel := pageContext(ctx, perPage)
	defer cancel()
	ranges, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	keys, args := make([][]string, 0, len(ranges)), make([][]any, 0, len(ranges))
	for _, r := range ranges {
		if r.Start < 0 || r.End >= clusterSlots || r.Start > r.End {
			return nil, fmt.Errorf("CLUSTER SLOTS: a range %d-%d", r.Start, r.End)
		}
		a := make([]any, 0, 2+r.End-r.Start+1)
		a = append(a, s.journal, sp.bns.name)
		for _, tag := range slotTags()[r.Start : r.End+1] {
			a = append(a, tag)
		}
		keys, args = append(keys, []string{slotIndexKey(sp.bns.name, r.Start)}), append(args, a)
	}
	cmds, err := evalEach(ctx, c, sweepAllScript, keys, args)
	if err != nil {
		return nil, err
	}
	var cursors []*indexCursor
	for i, cmd := range cmds {
		v, err := cmd.(*redis.Cmd).Slice()
		if err != nil {
			return nil, err
		}
		for j := 0; j+1 < len(v); j += 2 {
			at, err1 := toInt(v[j])
			n, err2 := toInt(v[j+1])
			if err1 != nil || err2 != nil || at < 1 || at > int64(ranges[i].End-ranges[i].Start+1) {
				return nil, errors.New("sweepall: unexpected reply")
			}
			cursors = append(cursors, &indexCursor{index: slotIndexKey(sp.bns.name, ranges[i].Start+int(at)-1), min: -1, left: n})
		}
	}
	return cursors, nil
}

// readPage reads the next entries of each cursor of batch and the bans
// they name, in two pipelined round trips under one deadline, and returns
// the cursors that have more.
func (sp *redisSpace) readPage(ctx context.Context, c redis.Cmdable, batch []*indexCursor, f store.BanFilter, perPage time.Duration, keep func(store.Ban)) ([]*indexCursor, error) {
	s := sp.s
	ctx, cancel := pageContext(ctx, perPage)
	defer cancel()
	count := int64(banPage / len(batch))
	ranges, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, cur := range batch {
			p.ZRangeByScoreWithScores(ctx, cur.index, &redis.ZRangeBy{
				Min: strconv.FormatFloat(cur.min, 'f', -1, 64), Max: "+inf", Offset: cur.skip, Count: count})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("protect: redis ban index: %w", err)
	}
	var (
		keys    []store.Key
		banKeys []string
		more    []*indexCursor
	)
	for i, cur := range batch {
		entries := ranges[i].(*redis.ZSliceCmd).Val()
		for _, e := range entries {
			if e.Score == cur.min {
				cur.skip++
			} else {
				cur.min, cur.skip = e.Score, 1
			}
			member, _ := e.Member.(string)
			k, err := store.ParseKey(member)
			if err != nil {
				s.log.Warn("protect: skipping a ban index entry", "index", cur.index, "entry", member, "error", err)
				continue
			}
			_, bk, _ := redisKeys(sp.ns, sp.bns.name, k)
			keys, banKeys = append(keys, k), append(banKeys, bk)
		}
		cur.left -= int64(len(entries))
		if int64(len(entries)) == count {
			more = append(more, cur)
		}
	}
	gets, _ := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, bk := range banKeys {
			p.Get(ctx, bk)
			p.PTTL(ctx, bk) // a temporary record on a key that never expires is damage
		}
		return nil
	})
	for i := range banKeys {
		rec, err := gets[2*i].(*redis.StringCmd).Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue // lifted, or expired: the next listing prunes it
		case err != nil && strings.Contains(err.Error(), "WRONGTYPE"):
			// Listed as damage, as take.lua and inspect.lua read it
			// (read_ban), for an operator to see and lift.
			rec = "not a ban record: a key of another type" // as read_ban (lua/prelude.lua) reads it
		case err != nil:
			return nil, fmt.Errorf("protect: redis list bans: %w", err)
		}
		// A damaged record is listed as one, for an operator to lift.
		b := readBan(keys[i], false, rec, pttlOf(gets[2*i+1]))
		if f.Match(b) {
			keep(b)
		}
	}
	return more, nil
}

// LiftBans implements store.BanPager: the bans on keys (none of them a
// range) are lifted by lua/unban.lua, a page of banPage at a time in one
// pipelined round trip, each page under a deadline of perPage.
func (sp *redisSpace) LiftBans(ctx context.Context, keys []store.Key, perPage time.Duration) ([]store.Ban, error) {
	s := sp.s
	lifted := []store.Ban{}
	for start := 0; start < len(keys); start += banPage {
		page := keys[start:min(start+banPage, len(keys))]
		for _, k := range page {
			s.bans.forget(sp.bns, k)
		}
		pctx, cancel := pageContext(ctx, perPage)
		cmds, err := sp.unbanPage(pctx, page, true)
		// Only the keys whose master lacked the script go again: the
		// others were lifted, and a second unban would find them gone.
		var again []int
		for i, c := range cmds {
			if isNoScript(c.Err()) {
				again = append(again, i)
			}
		}
		if len(again) > 0 {
			retry := make([]store.Key, len(again))
			for j, i := range again {
				retry[j] = page[i]
			}
			var more []redis.Cmder
			more, err = sp.unbanPage(pctx, retry, false)
			for j, i := range again {
				if j < len(more) {
					cmds[i] = more[j]
				}
			}
		}
		cancel()
		var reply redis.Error // a server's answer, not a lost connection or a deadline
		if err != nil && !errors.As(err, &reply) {
			return lifted, err
		}
		for i, cmd := range cmds {
			v, err := cmd.(*redis.Cmd).Slice()
			switch {
			case errors.Is(err, redis.Nil):
				continue // not banned any more
			case err != nil:
				return lifted, fmt.Errorf("protect: redis lift %s: %w", page[i], err)
			}
			s.damage.forget(sp.bns, page[i])
			lifted = append(lifted, unbanned(page[i], v)) // a damaged one is lifted too
		}
	}
	return lifted, nil
}

// unbanPage runs lua/unban.lua for each key of page in one pipeline, by
// its hash when sha is set, else with its text.
func (sp *redisSpace) unbanPage(ctx context.Context, page []store.Key, sha bool) ([]redis.Cmder, error) {
	s := sp.s
	return s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range page {
			_, bk, _ := redisKeys(sp.ns, sp.bns.name, k)
			keys := []string{bk, s.indexKey(sp.bns.name, k)}
			if sha {
				unbanScript.EvalSha(ctx, p, keys, k.String(), s.journal)
			} else {
				unbanScript.Eval(ctx, p, keys, k.String(), s.journal)
			}
		}
		return nil
	})
}

func isNoScript(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }
