package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/httpprotect/protect/store"
)

// A store whose Space is a store.Journal journals each ban written, by an
// operator or past BanLimit, each lift and each ban over, with the ban as
// stored; its cursors are distinct and each reads on from its own event;
// reading from the last is empty; a cursor that does not parse is an
// error, not ErrCursorGone. A ban over is journaled once, when the store
// notices it (the suite keeps asking, through Take, for up to 20 units),
// never before its end. A store without Journal skips the test.
func testJournal(t *testing.T, env *Env) {
	ctx := t.Context()
	sp := env.space(t, "journal:", limits(env.Unit))
	j, ok := sp.(store.Journal)
	if !ok {
		t.Skipf("%T is not a store.Journal: nothing to check", sp)
	}
	since := lastCursor(readJournal(t, j, ""))

	mk, _ := host("192.0.2.60")
	manual := addBan(t, sp, store.Ban{Key: mk, Reason: "journal | check", Source: store.SourceManual, By: "ops@host"}, 30*env.Unit)
	ak, aa := host("192.0.2.61")
	var auto store.Ban
	for i := 0; i < 6 && auto.Key == (store.Key{}); i++ {
		if r := take(t, sp, ak, aa, 1); r.NewBan {
			auto = *r.Ban
		}
	}
	if auto.Key != ak {
		t.Fatalf("six Takes of %s wrote no ban", ak)
	}
	take(t, sp, ak, aa, 1) // refused by its ban: nothing to journal
	if _, ok, err := sp.Lift(ctx, mk); !ok || err != nil {
		t.Fatalf("Lift(%s) = %v, %v; want lifted", mk, ok, err)
	}
	evs := readJournal(t, j, since)
	want := []store.Event{{Kind: store.EventBan, Ban: manual}, {Kind: store.EventBan, Ban: auto}, {Kind: store.EventLift, Ban: manual}}
	if len(evs) != len(want) {
		t.Fatalf("journal after a manual ban, an automatic ban and a lift = %s, want %s", eventList(evs), eventList(want))
	}
	for i, e := range evs {
		if e.Kind != want[i].Kind || !sameBan(e.Ban, want[i].Ban) || e.Time.IsZero() || e.Cursor == "" {
			t.Fatalf("event %d = %+v, want %s of %+v with a cursor and a time", i, e, want[i].Kind, want[i].Ban)
		}
	}
	if evs[1].Ban.Source != store.SourceAuto || evs[1].Ban.Offense != 1 {
		t.Fatalf("automatic ban journaled as %+v, want Source auto, offense 1", evs[1].Ban)
	}
	checkCursors(t, j, since, evs)

	bogus := "storetest:not-a-cursor"
	if got, err := j.Events(ctx, bogus, 10); err == nil || errors.Is(err, store.ErrCursorGone) {
		t.Fatalf("Events(%q) = %d events, %v; want an error (not ErrCursorGone: the journal never wrote it)", bogus, len(got), err)
	}

	ek, ea := host("192.0.2.62")
	short := addBan(t, sp, store.Ban{Key: ek, Reason: "short", Source: store.SourceManual}, 2*env.Unit)
	last := lastCursor(readJournal(t, j, lastCursor(evs)))
	env.Wait(3 * env.Unit)
	var expired []store.Event
	for i := 0; i < 20 && len(expired) == 0; i++ {
		take(t, sp, ek, ea, 1)
		for _, e := range readJournal(t, j, last) {
			if e.Kind == store.EventExpire && e.Ban.Key == ek {
				expired = append(expired, e)
			}
		}
		if len(expired) == 0 {
			env.Wait(env.Unit)
		}
	}
	if len(expired) == 0 {
		t.Fatalf("no %s event for %s within 20 units after its end, with a Take each unit", store.EventExpire, ek)
	}
	if e := expired[0]; !sameBan(e.Ban, short) || e.Time.Before(short.Expires) {
		t.Fatalf("expiry journaled as %+v at %v; want the ban %+v, at or after its end", e.Ban, e.Time, short)
	}
	env.Wait(env.Unit)
	take(t, sp, ek, ea, 1)
	n := 0
	for _, e := range readJournal(t, j, last) {
		if e.Kind == store.EventExpire && e.Ban.Key == ek {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the ban on %s is journaled over %d times, want once", ek, n)
	}
}

// readJournal reads j from since to its end, a page at a time.
func readJournal(t *testing.T, j store.Journal, since string) []store.Event {
	t.Helper()
	var out []store.Event
	for {
		page, err := j.Events(t.Context(), since, 100)
		if err != nil {
			t.Fatalf("Events(%q) = %v", since, err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		since = page[len(page)-1].Cursor
		if len(out) > 100_000 {
			t.Fatalf("Events from %q does not end: %d events and more", since, len(out))
		}
	}
}

// lastCursor is the cursor of the last of evs, or "" for none.
func lastCursor(evs []store.Event) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[len(evs)-1].Cursor
}

// checkCursors checks that the cursors of evs, read after since, are
// distinct, that each reads on from its own event (the order a store's
// cursors keep, whatever they look like), and that the last reads
// nothing.
func checkCursors(t *testing.T, j store.Journal, since string, evs []store.Event) {
	t.Helper()
	seen := map[string]bool{since: true}
	for i, e := range evs {
		if seen[e.Cursor] {
			t.Fatalf("event %d has cursor %q, which another already has", i, e.Cursor)
		}
		seen[e.Cursor] = true
		rest := readJournal(t, j, e.Cursor)
		if len(rest) != len(evs)-i-1 || len(rest) > 0 && rest[0].Cursor != evs[i+1].Cursor {
			t.Fatalf("Events(%q), event %d's cursor, = %s; want the %d events after it", e.Cursor, i, eventList(rest), len(evs)-i-1)
		}
	}
}

// sameBan reports whether two bans are one, times by their instant.
func sameBan(a, b store.Ban) bool {
	return a.Key == b.Key && a.Range == b.Range && a.Reason == b.Reason && a.Source == b.Source &&
		a.By == b.By && a.Offense == b.Offense && a.Created.Equal(b.Created) && a.Expires.Equal(b.Expires)
}

// eventList formats evs for a failure message.
func eventList(evs []store.Event) string {
	out := "["
	for i, e := range evs {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%s@%s", e.Kind, e.Ban.Key)
	}
	return out + "]"
}

// A store whose Journal and Bookmarks outlive a restart (Env.Reopen)
// keeps a reader's place: after the restart its bookmark is there, and
// its cursor reads on to the events after it, in order, a lift made just
// before the restart included; the events written after the restart
// follow them. A store without Reopen, Journal or Bookmarks skips the
// test.
func testJournalRestart(t *testing.T, env *Env) {
	if env.Reopen == nil {
		t.Skip("Env.Reopen is nil: nothing to check")
	}
	ctx := t.Context()
	lim := limits(env.Unit)
	sp := env.space(t, "restart:", lim)
	j, ok := sp.(store.Journal)
	bm, marks := sp.(store.Bookmarks)
	if !ok || !marks {
		t.Skipf("%T is not a store.Journal and store.Bookmarks: nothing to check", sp)
	}
	k1, _ := host("192.0.2.70")
	k2, _ := host("192.0.2.71")
	k3, _ := host("192.0.2.72")
	b1 := addBan(t, sp, store.Ban{Key: k1, Reason: "before", Source: store.SourceManual}, 60*env.Unit)
	place := lastCursor(readJournal(t, j, ""))
	if err := bm.SetBookmark(ctx, "reader", place, 60*env.Unit); err != nil {
		t.Fatalf("SetBookmark(reader) = %v", err)
	}
	if _, ok, err := sp.Lift(ctx, k1); !ok || err != nil {
		t.Fatalf("Lift(%s) = %v, %v; want lifted", k1, ok, err)
	}
	b2 := addBan(t, sp, store.Ban{Key: k2, Reason: "before the restart", Source: store.SourceManual}, 60*env.Unit)

	env.Store, env.probe = env.Reopen(t), nil
	sp = env.space(t, "restart:", lim)
	j, bm = sp.(store.Journal), sp.(store.Bookmarks)
	if got, ok, err := bm.Bookmark(ctx, "reader"); got != place || !ok || err != nil {
		t.Fatalf("Bookmark(reader) after a restart = %q, %v, %v; want %q, true, nil", got, ok, err, place)
	}
	b3 := addBan(t, sp, store.Ban{Key: k3, Reason: "after the restart", Source: store.SourceManual}, 60*env.Unit)
	evs := readJournal(t, j, place)
	want := []store.Event{{Kind: store.EventLift, Ban: b1}, {Kind: store.EventBan, Ban: b2}, {Kind: store.EventBan, Ban: b3}}
	if len(evs) != len(want) {
		t.Fatalf("journal after the reader's place, across a restart = %s, want %s", eventList(evs), eventList(want))
	}
	for i, e := range evs {
		if e.Kind != want[i].Kind || !sameBan(e.Ban, want[i].Ban) {
			t.Fatalf("event %d after a restart = %+v, want %s of %+v", i, e, want[i].Kind, want[i].Ban)
		}
	}
	checkCursors(t, j, place, evs)
}
