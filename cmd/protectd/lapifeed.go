package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/fnv"
	"slices"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/store"
)

// The stream's feed: what changed since a bouncer's last pull is read
// from the store's journal (store.Journal), and where each bouncer key
// stands is a bookmark in the store (store.Bookmarks), so that every
// protectd on one store answers every bouncer alike: a pull may go to any
// of them, and one that restarted goes on where the bouncer left off.
// The journal holds every ban, lift and expiry in the order the store
// wrote them, so the last event of a key since a position says whether
// the key is banned now and by which ban: a pull costs the events since
// the bouncer's place, whatever the number of bans in force.

const (
	// lapiPositionTTL is how long a bouncer's place is kept after its
	// last pull: as long as the journal keeps its events by default, past
	// which the place would name events trimmed away.
	lapiPositionTTL = 7 * 24 * time.Hour
	// lapiStoreCall bounds each read and write of the store a pull makes.
	lapiStoreCall = 5 * time.Second
	// lapiEventsPage is how many events one read of the journal asks for.
	lapiEventsPage = 10_000
	// lapiListSnaps is how many snapshots of the block lists an instance
	// keeps to diff a bouncer's against.
	lapiListSnaps = 4
	// lapiListLease is the longest a block list's entry is given for: a
	// bouncer drops it after that unless it is sent again, which every
	// answer after each half of it does (listSnapshot). A removal the
	// feed cannot tell a bouncer (a pull on another instance, or after a
	// restart, cannot diff against lists it never made) so lasts a lease
	// at most, not the ten years of a permanent ban.
	lapiListLease = 24 * time.Hour
)

// errFeedLost says that a bouncer's place cannot be followed: the journal
// trimmed the events since, holds no event of the place's cursor, or
// more keys changed than historyMax.
var errFeedLost = errors.New("the journal no longer holds what changed since this bouncer's place")

// A lapiPosition is where a bouncer key stands, as its bookmark holds it.
// Sent is what the last answer covered, which the bouncer may not have
// read; Acked what the answer before covered. A pull on the connection
// that carried Sent proves the bouncer read it (an HTTP/1 client asks
// again on a connection only once it read the answer before) and is
// answered from Sent; any other is answered from Acked, so that one lost
// answer is sent again.
type lapiPosition struct {
	Acked lapiMark `json:"acked"`
	Sent  lapiMark `json:"sent"`
	Conn  string   `json:"conn"` // the instance and connection that carried Sent
}

// A lapiMark is what one answer covered: the journal to Cursor ("" for
// the journal's start), and the block lists' entries of the snapshot
// whose hash is Lists (0: none given).
type lapiMark struct {
	Cursor string `json:"cursor"`
	Lists  uint64 `json:"lists,omitempty"`
}

// instanceID names this process among those that serve one store's
// bouncers, so that a connection number of one is never taken for
// another's.
func instanceID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// bookmarkName is the name of key's position in the store: a hash, so
// that the key itself is never written there.
func bookmarkName(key [sha256.Size]byte) string {
	return "lapi:" + hex.EncodeToString(key[:16])
}

// position reads key's place, known false when there is none, and the
// bookmark's text as it was ("" for none), for restorePosition.
func (l *lapi) position(ctx context.Context, key [sha256.Size]byte) (pos lapiPosition, known bool, text string, err error) {
	ctx, cancel := context.WithTimeout(ctx, lapiStoreCall)
	defer cancel()
	text, ok, err := l.journal.Bookmark(ctx, bookmarkName(key))
	if err != nil || !ok || text == "" {
		return lapiPosition{}, false, "", err // "": a place put back to none (restorePosition)
	}
	if err := json.Unmarshal([]byte(text), &pos); err != nil {
		// A damaged bookmark costs its bouncer one full answer, no more.
		l.log.Warn("crowdsec local api: a bouncer's place in the store does not parse; it is answered in full",
			"bookmark", bookmarkName(key), "err", err.Error())
		return lapiPosition{}, false, text, nil
	}
	return pos, true, text, nil
}

// savePosition saves pos as key's place, and returns the text saved (""
// when saving failed).
func (l *lapi) savePosition(ctx context.Context, key [sha256.Size]byte, pos lapiPosition) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lapiStoreCall)
	defer cancel()
	b, _ := json.Marshal(pos) // strings and a number: always marshals
	if err := l.journal.SetBookmark(ctx, bookmarkName(key), string(b), lapiPositionTTL); err != nil {
		// The next pull is answered from the place before, which sends
		// this one's changes again.
		l.log.Error("crowdsec local api: saving a bouncer's place", "err", err.Error())
		return ""
	}
	return string(b)
}

// restorePosition puts key's bookmark back to before, the text position
// read, if it still holds saved: a place that another pull of the key
// saved since is newer than both, and stays.
func (l *lapi) restorePosition(ctx context.Context, key [sha256.Size]byte, saved, before string) {
	if saved == "" {
		return // nothing was saved over before
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lapiStoreCall)
	defer cancel()
	if _, err := l.journal.SwapBookmark(ctx, bookmarkName(key), saved, before, lapiPositionTTL); err != nil {
		l.log.Error("crowdsec local api: putting a bouncer's place back", "err", err.Error())
	}
}

// head is the cursor of the journal's newest event, read on from the last
// one found: a startup answer's listing is taken after it, so that
// whatever changes meanwhile is in the events that follow.
func (l *lapi) head(ctx context.Context) (string, error) {
	l.headMu.Lock()
	defer l.headMu.Unlock()
	cursor := l.headCursor
	for {
		cctx, cancel := context.WithTimeout(ctx, lapiStoreCall)
		evs, err := l.journal.Events(cctx, cursor, lapiEventsPage)
		cancel()
		if (errors.Is(err, store.ErrCursorGone) || errors.Is(err, store.ErrBadCursor)) && cursor != "" {
			// Trimmed past the last head (what is kept is newer), or a
			// journal that lost its events (a Redis flushed or restarted
			// empty), which the last head is now past.
			cursor = ""
			continue
		}
		if err != nil {
			return "", err
		}
		if len(evs) == 0 {
			l.headCursor = cursor
			return cursor, nil
		}
		cursor = evs[len(evs)-1].Cursor
	}
}

// keyChange is what the events since a place did to one key: the bans
// they named, and the ban in force after the last (nil: none).
type keyChange struct {
	seen  []protect.Ban
	last  *protect.Ban
	prior bool // the first event is an operator's ban, which may replace one given before the place
}

// changes reads the journal after cursor to its end. It returns the
// change of each key an event names (consumer keys aside: they are no
// decision), and the cursor of the last event ("" when none and cursor
// was ""). errFeedLost when the journal trimmed the events after cursor,
// or when more than historyMax keys changed.
func (l *lapi) changes(ctx context.Context, cursor string) (map[protect.Key]*keyChange, string, error) {
	m := map[protect.Key]*keyChange{}
	for {
		cctx, cancel := context.WithTimeout(ctx, lapiStoreCall)
		evs, err := l.journal.Events(cctx, cursor, lapiEventsPage)
		cancel()
		switch {
		case errors.Is(err, store.ErrCursorGone), errors.Is(err, store.ErrBadCursor):
			// Trimmed away, or a cursor this journal never wrote: one of
			// a journal that lost its events, or of another store.
			return nil, "", errFeedLost
		case err != nil:
			return nil, "", err
		case len(evs) == 0:
			return m, cursor, nil
		}
		for i := range evs {
			e := &evs[i]
			b := e.Ban
			if !b.Key.Prefix.IsValid() || b.Malformed != "" {
				continue // no decision; a damaged entry is logged by the store
			}
			c := m[b.Key]
			switch e.Kind {
			case store.EventBan:
				if c == nil {
					// A client under a ban is refused, not counted: only
					// an operator's ban can replace one in force.
					c = &keyChange{prior: b.Source != store.SourceAuto}
				}
				c.last = &e.Ban
			case store.EventLift, store.EventExpire:
				if c == nil {
					c = &keyChange{}
				}
				c.last = nil
			default:
				continue // allows lift the bans they cover with events of their own
			}
			c.seen = append(c.seen, b)
			m[b.Key] = c
		}
		if len(m) > l.opt.historyMax {
			return nil, "", errFeedLost
		}
		cursor = evs[len(evs)-1].Cursor
	}
}

// priorID names whatever ban of k a bouncer was given before its place,
// which an operator's ban may have replaced: it is deleted by value, as
// bouncers delete, before the new decision is added, so that the new
// one's length holds (a bouncer adds nothing over a value it holds, and
// deletes nothing it does not hold).
func priorID(k protect.Key) int64 {
	h := fnv.New64a()
	h.Write([]byte("prior "))
	h.Write([]byte(k.String()))
	return int64(h.Sum64()&(1<<53-1)) | 1
}

// feedEntries turns the changes into the decisions deleted and new, each
// in cmpEntry order, that f selects, at now.
func feedEntries(m map[protect.Key]*keyChange, f filter, now time.Time) (deleted, added []entry) {
	for k, c := range m {
		var cur *entry
		if c.last != nil && (c.last.Permanent() || c.last.Expires.After(now)) {
			if e, ok := entryOf(*c.last, now); ok {
				cur = &e
				if f.match(cur) {
					added = append(added, e)
				}
			}
		}
		var ids []int64
		gone := func(e entry) {
			if (cur == nil || e.id != cur.id) && !slices.Contains(ids, e.id) && f.match(&e) {
				ids = append(ids, e.id)
				deleted = append(deleted, e)
			}
		}
		for _, b := range c.seen {
			if e, ok := entryOf(b, now); ok {
				gone(e)
			}
		}
		if c.prior && len(ids) == 0 {
			// One deletion of the value is enough: bouncers delete by it.
			if e, ok := entryOf(c.seen[0], now); ok {
				e.id = priorID(k)
				gone(e)
			}
		}
	}
	sortEntries(deleted)
	sortEntries(added)
	return deleted, added
}

func sortEntries(es []entry) {
	slices.SortFunc(es, func(a, b entry) int { return cmpEntry(&a, &b) })
}

// listSnapshot is the block lists' entries as a snapshot, and its hash;
// nil and 0 when the Local API hands on no block list. An entry that
// lasts longer than its lease (lapiListLease) is given until the lease's
// end: time is cut into half leases, and an entry of the half at now is
// given to the end of the next, so that it is sent again, with a lease
// renewed, before the one a bouncer holds runs out.
func (l *lapi) listSnapshot(now time.Time) (*snapshot, uint64) {
	if l.lists == nil {
		return nil, 0
	}
	bans := l.lists()
	half := int64(lapiListLease / 2)
	epoch := now.UnixNano() / half
	leaseEnd := time.Unix(0, (epoch+2)*half)
	h := fnv.New64a()
	var ds []entry
	for i := range bans {
		b := &bans[i]
		if b.Permanent() || b.Expires.After(leaseEnd) {
			b.Expires = leaseEnd
		}
		e, ok := entryOf(*b, now)
		if !ok {
			continue
		}
		ds = append(ds, e)
	}
	sortEntries(ds)
	var w [8]byte
	binary.BigEndian.PutUint64(w[:], uint64(epoch))
	h.Write(w[:])
	for _, b := range bans {
		h.Write([]byte(b.Key.String()))
		h.Write([]byte(b.Reason))
		binary.BigEndian.PutUint64(w[:], uint64(b.Expires.UnixNano()))
		h.Write(w[:])
	}
	sum := h.Sum64() | 1 // never 0, which is "none given"
	snap := &snapshot{ds: ds, epoch: epoch}
	l.listMu.Lock()
	if _, ok := l.listSnaps[sum]; !ok {
		if len(l.listSnaps) >= lapiListSnaps {
			clear(l.listSnaps) // the lists changed that often: start again
		}
		l.listSnaps[sum] = snap
	}
	l.listMu.Unlock()
	return snap, sum
}

// listChanges is what changed in the block lists between the snapshot of
// hash given and cur: every entry is new when given is not one this
// instance made (another's, or before a restart), for the deletions
// between cannot be known then.
func (l *lapi) listChanges(given uint64, cur *snapshot, f filter) (deleted, added []entry) {
	if cur == nil {
		return nil, nil
	}
	l.listMu.Lock()
	base := l.listSnaps[given]
	l.listMu.Unlock()
	if base != nil && base.epoch != cur.epoch {
		base = nil // a new half lease: every entry again, its lease renewed
	}
	keep := func(s, other *snapshot) []entry {
		var out []entry
		var o []entry
		if other != nil {
			o = other.ds
		}
		j := 0
		for i := range s.ds {
			e := &s.ds[i]
			for j < len(o) && cmpEntry(&o[j], e) < 0 {
				j++
			}
			if (j < len(o) && cmpEntry(&o[j], e) == 0) || !f.match(e) {
				continue
			}
			out = append(out, *e)
		}
		return out
	}
	if base != nil {
		deleted = keep(base, cur)
	}
	return deleted, keep(cur, base)
}
