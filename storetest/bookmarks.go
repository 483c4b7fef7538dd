package storetest

import (
	"testing"
	"time"

	"github.com/httpprotect/protect/store"
)

// A store whose Space is a store.Bookmarks reads back what it saved
// under a name, whole, for every Space bound to the ban namespace;
// replaces it when saved again; keeps names apart; has nothing under a
// name never saved; forgets it after its ttl; refuses a ttl under a
// second; and swaps a bookmark only from the text it holds ("" for
// none). A store without Bookmarks skips the test.
func testBookmarks(t *testing.T, env *Env) {
	ctx := t.Context()
	sp := env.space(t, "bookmarks:", limits(env.Unit))
	bm, ok := sp.(store.Bookmarks)
	if !ok {
		t.Skipf("%T is not a store.Bookmarks: nothing to check", sp)
	}
	other, ok := env.space(t, "bookmarks:", limits(env.Unit)).(store.Bookmarks)
	if !ok {
		t.Fatalf("a second Space of one store is no store.Bookmarks")
	}
	read := func(b store.Bookmarks, name, want string, wantOK bool) {
		t.Helper()
		got, ok, err := b.Bookmark(ctx, name)
		if err != nil || got != want || ok != wantOK {
			t.Errorf("Bookmark(%q) = %q, %v, %v; want %q, %v, nil", name, got, ok, err, want, wantOK)
		}
	}
	set := func(name, text string) {
		t.Helper()
		if err := bm.SetBookmark(ctx, name, text, time.Second+3*env.Unit); err != nil {
			t.Fatalf("SetBookmark(%q, %q) = %v", name, text, err)
		}
	}
	read(bm, "never", "", false)
	const text = `{"cursor":"1-0 2-0","conn":"a|b"}` + "\n\x00é"
	set("bouncer-a", text)
	set("bouncer-b", "b")
	read(bm, "bouncer-a", text, true)
	read(other, "bouncer-a", text, true)
	read(bm, "bouncer-b", "b", true)
	set("bouncer-b", "")
	read(other, "bouncer-b", "", true)
	if err := bm.SetBookmark(ctx, "short", "x", 0); err == nil {
		t.Errorf("SetBookmark(ttl 0) = nil, want an error")
	}
	read(bm, "short", "", false)
	swap := func(b store.Bookmarks, name, old, text string, want bool) {
		t.Helper()
		if got, err := b.SwapBookmark(ctx, name, old, text, time.Second+3*env.Unit); err != nil || got != want {
			t.Errorf("SwapBookmark(%q, %q, %q) = %v, %v; want %v, nil", name, old, text, got, err, want)
		}
	}
	swap(bm, "bouncer-a", "not it", "x", false)
	read(bm, "bouncer-a", text, true)
	swap(other, "bouncer-a", text, "a2", true)
	read(bm, "bouncer-a", "a2", true)
	swap(bm, "bouncer-c", "x", "c", false) // none is ""
	read(bm, "bouncer-c", "", false)
	swap(bm, "bouncer-c", "", "c", true)
	read(other, "bouncer-c", "c", true)
	if _, err := bm.SwapBookmark(ctx, "short", "", "x", 0); err == nil {
		t.Errorf("SwapBookmark(ttl 0) = nil, want an error")
	}
	env.Wait(time.Second + 6*env.Unit)
	swap(bm, "bouncer-c", "c", "gone", false) // past its ttl it holds ""
	read(bm, "bouncer-a", "", false)
	read(other, "bouncer-b", "", false)
}
