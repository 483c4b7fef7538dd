package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/store"
	"github.com/redis/go-redis/v9"
)

// journalLimits bans a key on its third request within a minute, for
// an hour.
var journalLimits = store.Limits{TTL: time.Minute, BanLimit: 2, BanDuration: time.Hour, BanFactor: 2, MaxBanDuration: 24 * time.Hour, OffenseWindow: 24 * time.Hour}

// journalSpace is a space of a namespace of the test's own on the Redis
// at addr, its client counting round trips.
func journalSpace(t *testing.T, addr string, opt Options) (*Store, *redisSpace, *countingHook) {
	t.Helper()
	c := dial(addr)
	t.Cleanup(func() { c.Close() })
	hook := &countingHook{}
	c.AddHook(hook)
	ns := uniqueNamespace(t, c)
	opt.RangeRefresh, opt.Logger = -1, discardLogger()
	s := New(c, opt)
	t.Cleanup(func() { s.Close() })
	sp, err := s.Space(store.Scope{Namespace: ns, Limits: journalLimits})
	if err != nil {
		t.Fatal(err)
	}
	return s, sp.(*redisSpace), hook
}

// hostKey is the key of one IPv4 address.
func hostKey(t *testing.T, a string) (store.Key, netip.Addr) {
	t.Helper()
	addr := netip.MustParseAddr(a)
	return store.Key{Prefix: netip.PrefixFrom(addr, 32)}, addr
}

// The ban the take script writes past BanLimit is journaled by that
// script: the request that bans is still one round trip, and the
// journal holds the ban as Take returned it.
func TestRedisJournalBanOneRoundTrip(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			ctx := t.Context()
			_, sp, hook := journalSpace(t, target.Addr(t), Options{BanCacheTTL: -1})
			k, a := hostKey(t, "192.0.2.70")
			for i := range 2 {
				if r, err := sp.Take(ctx, k, a, 1); err != nil || r.Banned() {
					t.Fatalf("Take #%d = %+v, %v; want counted, not banned", i+1, r, err)
				}
			}
			hook.Take()
			r, err := sp.Take(ctx, k, a, 1)
			if err != nil || !r.NewBan {
				t.Fatalf("Take #3 = %+v, %v; want a new ban", r, err)
			}
			if trips, names := hook.Take(); trips != 1 || names[0] != "evalsha" {
				t.Fatalf("Take #3: %d round trips %v; want 1 evalsha", trips, names)
			}
			evs, err := sp.Events(ctx, "", 10)
			if err != nil || len(evs) != 1 {
				t.Fatalf("Events(\"\") = %+v, %v; want the one ban", evs, err)
			}
			if e := evs[0]; e.Kind != store.EventBan || e.Ban.Key != k || e.Ban.Source != store.SourceAuto || e.Ban.Offense != 1 || !e.Ban.Expires.Equal(r.Ban.Expires) {
				t.Fatalf("Events(\"\")[0] = %+v; want the ban %+v", e, *r.Ban)
			}
		})
	}
}

// The journal is trimmed to about JournalLength events: Redis trims
// whole stream nodes (XADD MAXLEN ~), so a stream holds from
// JournalLength to JournalLength plus a node (100 entries) less one;
// and a cursor trimmed away is ErrCursorGone, while the cursor of the
// event just before the oldest kept reads on. On a real server, 100,000
// events written by eight clients at once are trimmed alike.
func TestRedisJournalTrimmedByLength(t *testing.T) {
	for _, tc := range []struct {
		target          redistest.Target // one stream: a Cluster's are trimmed each alone
		length, written int
		writers         int
	}{
		{redisTargets[0], 500, 2000, 1},
		{redisTargets[1], 10_000, 100_000, 8},
	} {
		t.Run(tc.target.Name, func(t *testing.T) {
			ctx := t.Context()
			s, sp, _ := journalSpace(t, tc.target.Addr(t), Options{JournalLength: tc.length})
			k, _ := hostKey(t, "192.0.2.71")
			ban := func(i int) error {
				_, err := sp.AddBan(ctx, store.Ban{Key: k, Reason: fmt.Sprint("ban ", i), Source: store.SourceManual}, time.Hour)
				return err
			}
			// The first and the last alone, so that their places are known.
			if err := ban(0); err != nil {
				t.Fatal(err)
			}
			evs, err := sp.Events(ctx, "", 1)
			if err != nil || len(evs) != 1 {
				t.Fatalf("Events(\"\", 1) = %v, %v; want the first ban", evs, err)
			}
			first := evs[0].Cursor
			var (
				wg     sync.WaitGroup
				next   atomic.Int64 // the next event to write, less one
				failed atomic.Pointer[error]
			)
			for range tc.writers {
				wg.Go(func() {
					for i := int(next.Add(1)); i < tc.written-1 && failed.Load() == nil; i = int(next.Add(1)) {
						if err := ban(i); err != nil {
							failed.Store(&err)
						}
					}
				})
			}
			wg.Wait()
			if err := failed.Load(); err != nil {
				t.Fatal(*err)
			}
			if err := ban(tc.written - 1); err != nil {
				t.Fatal(err)
			}
			stream := streamKey(s.indexKey(sp.bns.name, k))
			n, err := s.client.XLen(ctx, stream).Result()
			if err != nil || n < int64(tc.length) || n >= int64(tc.length)+100 {
				t.Fatalf("XLEN %s after %d events = %d, %v; want %d to %d", stream, tc.written, n, err, tc.length, tc.length+99)
			}
			if _, err := sp.Events(ctx, first, 10); !errors.Is(err, store.ErrCursorGone) {
				t.Fatalf("Events(the first cursor) = %v; want ErrCursorGone", err)
			}
			kept := readAll(t, sp, "")
			if len(kept) != int(n) || kept[len(kept)-1].Ban.Reason != fmt.Sprint("ban ", tc.written-1) {
				t.Fatalf("Events from the oldest kept = %d events, want %d ending with ban %d", len(kept), n, tc.written-1)
			}
			// The oldest kept names the one before it, trimmed: a reader
			// that stood there missed nothing.
			msgs, err := s.client.XRangeN(ctx, stream, "-", "+", 1).Result()
			if err != nil || len(msgs) != 1 {
				t.Fatalf("XRANGE %s - + COUNT 1 = %v, %v", stream, msgs, err)
			}
			prev, _ := msgs[0].Values["prev"].(string)
			if got, err := sp.Events(ctx, prev, 1); err != nil || len(got) != 1 || got[0].Cursor != kept[0].Cursor {
				t.Fatalf("Events(%q, the one before the oldest kept) = %v, %v; want the oldest kept, %s", prev, got, err, kept[0].Cursor)
			}
		})
	}
}

// The journal keeps JournalAge: an event older is trimmed on the next
// read, and its cursor is then ErrCursorGone.
func TestRedisJournalTrimmedByAge(t *testing.T) {
	m := miniredis.RunT(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	m.SetTime(now)
	_, sp, _ := journalSpace(t, m.Addr(), Options{JournalAge: time.Hour})
	ctx := t.Context()
	k, _ := hostKey(t, "192.0.2.72")
	if _, err := sp.AddBan(ctx, store.Ban{Key: k, Reason: "old", Source: store.SourceManual}, 0); err != nil {
		t.Fatal(err)
	}
	old := readAll(t, sp, "")
	if len(old) != 1 {
		t.Fatalf("Events(\"\") = %d events, want 1", len(old))
	}
	for _, tt := range []struct {
		after time.Duration
		kept  int
	}{
		{time.Hour - time.Millisecond, 1}, // not yet an hour old
		{time.Hour + time.Millisecond, 0},
	} {
		m.SetTime(now.Add(tt.after))
		if got := readAll(t, sp, ""); len(got) != tt.kept {
			t.Fatalf("Events(\"\") %v after = %d events, want %d", tt.after, len(got), tt.kept)
		}
	}
	if _, err := sp.Events(ctx, old[0].Cursor, 10); err != nil {
		t.Fatalf("Events(the last cursor, all trimmed) = %v; want none (nothing after it was lost)", err)
	}
	m.SetTime(now.Add(time.Hour + time.Second))
	if _, err := sp.AddBan(ctx, store.Ban{Key: k, Reason: "new", Source: store.SourceManual}, 0); err != nil {
		t.Fatal(err)
	}
	m.SetTime(now.Add(3 * time.Hour))
	if _, err := sp.Events(ctx, old[0].Cursor, 10); !errors.Is(err, store.ErrCursorGone) {
		t.Fatalf("Events(a cursor before an event trimmed by age) = %v; want ErrCursorGone", err)
	}
}

// readAll reads sp's journal from since to its end.
func readAll(t *testing.T, sp *redisSpace, since string) []store.Event {
	t.Helper()
	var out []store.Event
	for {
		page, err := sp.Events(t.Context(), since, 1000)
		if err != nil {
			t.Fatalf("Events(%q) = %v", since, err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		since = page[len(page)-1].Cursor
	}
}

// A journal entry written by someone else that is no event of this store
// neither panics nor stops the read: a record that does not decode is an
// event whose Ban is Malformed, as a listing shows a damaged ban; an
// entry with no kind or key this store reads is skipped, and the events
// after it are read.
func TestRedisJournalDamagedEntries(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			ctx := t.Context()
			s, sp, _ := journalSpace(t, target.Addr(t), Options{})
			k, _ := hostKey(t, "192.0.2.73")
			if _, err := sp.AddBan(ctx, store.Ban{Key: k, Reason: "before", Source: store.SourceManual}, time.Hour); err != nil {
				t.Fatal(err)
			}
			stream := streamKey(s.indexKey(sp.bns.name, k))
			for _, v := range []map[string]any{
				{"kind": "ban", "key": k.String(), "rec": "garbage"},
				{"kind": "party", "key": k.String(), "rec": "1|0|0|manual||x"},
				{"kind": "lift", "key": "not a key{", "rec": "1|0|0|manual||x"},
				{"nothing": "here"},
			} {
				if err := s.client.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: v}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			// A top entry deleted by hand leaves the stream's last ID
			// after every entry it holds: the next event still goes in.
			top := "9999999999999999-0"
			if err := s.client.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: top, Values: map[string]any{"x": "y"}}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := s.client.XDel(ctx, stream, top).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := sp.AddBan(ctx, store.Ban{Key: k, Reason: "after", Source: store.SourceManual}, time.Hour); err != nil {
				t.Fatal(err)
			}
			other, _ := hostKey(t, "198.51.100.5")
			if _, err := sp.AddBan(ctx, store.Ban{Key: other, Reason: "other", Source: store.SourceManual}, time.Hour); err != nil {
				t.Fatal(err)
			}
			evs := readAll(t, sp, "")
			var got []string
			for _, e := range evs {
				got = append(got, fmt.Sprintf("%s %s %q malformed=%v", e.Kind, e.Ban.Key, e.Ban.Reason, e.Ban.Malformed != ""))
			}
			want := []string{
				fmt.Sprintf("ban %s %q malformed=false", k, "before"),
				fmt.Sprintf("ban %s %q malformed=true", k, ""),
			}
			if target.Name == "redis-cluster" {
				// The event after the hand-made top has an ID far in the
				// future, which every stream's next entry would fall
				// before: Events holds it back until its time (readTime)
				// rather than hand out a cursor that would pass them. The
				// other slots' events go on.
				want = append(want, fmt.Sprintf("ban %s %q malformed=false", other, "other"))
			} else {
				want = append(want,
					fmt.Sprintf("ban %s %q malformed=false", k, "after"),
					fmt.Sprintf("ban %s %q malformed=false", other, "other"))
			}
			if strings.Join(got, "; ") != strings.Join(want, "; ") {
				t.Fatalf("Events with damaged entries = %q, want %q", got, want)
			}
		})
	}
}

// A cursor parses as journalPos.cursor writes it, and nothing else does:
// a bad one wraps ErrBadCursor, never ErrCursorGone.
func TestParseCursor(t *testing.T) {
	for _, tt := range []struct {
		in      string
		cluster bool
		want    journalPos
		ok      bool
	}{
		{"1796416635489418-0", false, journalPos{streamID{1796416635489418, 0}, 0}, true},
		{"1-2.16383", true, journalPos{streamID{1, 2}, 16383}, true},
		{"1-2.16384", true, journalPos{}, false},
		{"1-2.01", true, journalPos{}, false},
		{"1-2", true, journalPos{}, false},
		{"1-2.3", false, journalPos{}, false},
		{"1", false, journalPos{}, false},
		{"-1-2", false, journalPos{}, false},
		{"1-+2", false, journalPos{}, false},
		{"storetest:not-a-cursor", false, journalPos{}, false},
		{"99999999999999999999-0", false, journalPos{}, false},
	} {
		got, err := parseCursor(tt.in, tt.cluster)
		if tt.ok {
			if err != nil || got != tt.want {
				t.Errorf("parseCursor(%q, %v) = %+v, %v; want %+v", tt.in, tt.cluster, got, err, tt.want)
			} else if back := got.cursor(tt.cluster); back != tt.in {
				t.Errorf("parseCursor(%q, %v).cursor() = %q, want %q", tt.in, tt.cluster, back, tt.in)
			}
			continue
		}
		if !errors.Is(err, store.ErrBadCursor) || errors.Is(err, store.ErrCursorGone) {
			t.Errorf("parseCursor(%q, %v) = %+v, %v; want an error wrapping ErrBadCursor", tt.in, tt.cluster, got, err)
		}
	}
}

// A cursor past the newest event is one this journal never wrote.
func TestRedisJournalCursorPastNewest(t *testing.T) {
	_, sp, _ := journalSpace(t, miniredis.RunT(t).Addr(), Options{})
	ctx := context.Background()
	for _, since := range []string{"1-0", "99999999999999-0"} {
		if got, err := sp.Events(ctx, since, 10); !errors.Is(err, store.ErrBadCursor) {
			t.Fatalf("Events(%q) on an empty journal = %v, %v; want ErrBadCursor", since, got, err)
		}
	}
	k, _ := hostKey(t, "192.0.2.74")
	if _, err := sp.AddBan(ctx, store.Ban{Key: k, Source: store.SourceManual}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got, err := sp.Events(ctx, "99999999999999999-0", 10); !errors.Is(err, store.ErrBadCursor) {
		t.Fatalf("Events(past the newest) = %v, %v; want ErrBadCursor", got, err)
	}
}

// A journal entry or a cursor is data another process may have written:
// reading one never panics; an entry is an event with a cursor and a
// time, or none; a cursor that parses writes back as itself.
func FuzzJournalEntry(f *testing.F) {
	f.Add("1796416635489418-0", "ban", "192.0.2.1", "0", "1|2|0|manual||r", "1796416635489", "1-0.5")
	f.Add("x", "lift", "198.51.100.0/24", "1", "garbage", "-1", "")
	f.Add("18446744073709551615-18446744073709551615", "expire", "", "", "", "99999999999999999999", "1-2.16384")
	s := New(nil, Options{RangeRefresh: -1, Logger: discardLogger()})
	sp := &redisSpace{s: s, bns: s.bans.namespace("fuzz:")}
	f.Fuzz(func(t *testing.T, id, kind, key, isRange, rec, ms, cursor string) {
		for _, cluster := range []bool{false, true} {
			if p, err := parseCursor(cursor, cluster); err == nil && p.cursor(cluster) != cursor {
				t.Fatalf("parseCursor(%q).cursor() = %q", cursor, p.cursor(cluster))
			}
		}
		reply := []any{id, id, []any{[]any{id, []any{"kind", kind, "key", key, "range", isRange, "rec", rec, "time", ms}}, "junk", []any{id}}}
		r, err := decodeStreamRead(reply, 2)
		if err != nil {
			t.Fatalf("decodeStreamRead = %v", err)
		}
		evs, _, _ := sp.merge([]streamRead{r}, 0, journalPos{}, 10, false)
		for _, e := range evs {
			if e.Cursor == "" || e.Time.IsZero() || e.Kind == 0 {
				t.Fatalf("event %+v from entry %q: want a cursor, a time and a kind", e, id)
			}
		}
	})
}

// A follower of a Cluster's journal sees every event once, in order,
// while bans are written on every master at once: Events reads the
// masters one after another, and hands out no event before which
// another master may still write (readTime).
func TestRedisJournalFollowCluster(t *testing.T) {
	_, sp, _ := journalSpace(t, redisTargets[2].Addr(t), Options{})
	ctx := t.Context()
	const writers, each = 4, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				a := netip.AddrFrom4([4]byte{10, byte(w), byte(i >> 8), byte(i)})
				if _, err := sp.AddBan(ctx, store.Ban{Key: store.Key{Prefix: netip.PrefixFrom(a, 32)}, Source: store.SourceManual}, time.Hour); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var followed []string
	cursor := ""
	follow := func() int {
		evs, err := sp.Events(ctx, cursor, 1000)
		if err != nil {
			t.Fatalf("Events(%q) = %v", cursor, err)
		}
		for _, e := range evs {
			followed = append(followed, e.Cursor)
			cursor = e.Cursor
		}
		return len(evs)
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		follow()
	}
	for follow() > 0 {
	}
	var all []string
	for _, e := range readAll(t, sp, "") {
		all = append(all, e.Cursor)
	}
	if len(all) != writers*each || !slices.Equal(followed, all) {
		missed := 0
		for _, c := range all {
			if !slices.Contains(followed, c) {
				missed++
			}
		}
		t.Fatalf("a follower read %d events, the journal holds %d (want %d): %d missed", len(followed), len(all), writers*each, missed)
	}
}
