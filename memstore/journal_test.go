package memstore

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/heaptest"
	"github.com/httpprotect/protect/store"
)

// events reads sp's whole journal after since.
func events(t *testing.T, sp Space, since string) []store.Event {
	t.Helper()
	evs, err := sp.(store.Journal).Events(t.Context(), since, 1<<20)
	if err != nil {
		t.Fatalf("Events(%q) = %v", since, err)
	}
	return evs
}

// kinds formats evs as kind@key, for failure messages and comparisons.
func kinds(evs []store.Event) string {
	var b strings.Builder
	for i, e := range evs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s@%s", e.Kind, e.Ban.Key)
	}
	return b.String()
}

// Every ban written, lifted or over is journaled once, in order, with
// cursors 1, 2, 3, ...; a ban over is journaled when the store notices,
// never before its end.
func TestJournalEvents(t *testing.T) {
	s, clk := newTestMemoryStore(t, MemoryOptions{})
	lim := testLimits()
	lim.BanLimit = 2
	sp := memSpaceFor(t, s, "ns:", lim)
	ctx := t.Context()
	manual, auto, name := addrKeyFor(1), addrKeyFor(2), Key{Name: "cus_1"}
	rng := Key{Prefix: netip.MustParsePrefix("192.0.2.0/24")}
	if _, err := sp.AddBan(ctx, Ban{Key: manual, Source: SourceManual, Reason: "r", By: "ops"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		mustTake(t, sp, auto, auto.Prefix.Addr())
	}
	if _, err := sp.AddBan(ctx, Ban{Key: rng, Range: true, Source: SourceManual}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.AddBan(ctx, Ban{Key: name, Source: SourceManual}, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := sp.Lift(ctx, name); !ok {
		t.Fatal("Lift(name) found nothing")
	}
	if _, ok, _ := sp.Lift(ctx, rng); !ok {
		t.Fatal("Lift(range) found nothing")
	}
	mustTake(t, sp, auto, auto.Prefix.Addr()) // refused by its ban: nothing journaled
	clk.Advance(time.Hour + time.Second)
	mustTake(t, sp, auto, auto.Prefix.Addr()) // its ban is found over
	mustTake(t, sp, auto, auto.Prefix.Addr()) // and forgotten: not journaled again
	s.sweep()                                 // the manual ban is swept
	s.sweep()
	evs := events(t, sp, "")
	want := "ban@10.0.0.1 ban@10.0.0.2 ban@192.0.2.0/24 ban@cus_1 lift@cus_1 lift@192.0.2.0/24 expire@10.0.0.1 expire@10.0.0.2"
	if got := kinds(evs); got != want && got != strings.Replace(want, "expire@10.0.0.1 expire@10.0.0.2", "expire@10.0.0.2 expire@10.0.0.1", 1) {
		t.Fatalf("journal = %s\nwant      %s", got, want)
	}
	for i, e := range evs {
		if want := strconv.FormatUint(s.journalStart()+uint64(i), 10); e.Cursor != want {
			t.Fatalf("event %d has cursor %q, want %s: the store's start plus %d", i, e.Cursor, want, i)
		}
		if e.Kind == store.EventExpire && e.Time.Before(e.Ban.Expires) {
			t.Fatalf("%s journaled at %v, before its end %v", e.Kind, e.Time, e.Ban.Expires)
		}
	}
	if b := evs[1].Ban; b.Source != SourceAuto || b.Offense != 1 || b.Key != auto {
		t.Fatalf("automatic ban journaled as %+v", b)
	}
	if b := evs[0].Ban; b.By != "ops" || b.Reason != "r" || b.Source != SourceManual {
		t.Fatalf("manual ban journaled as %+v", b)
	}
	if got := events(t, sp, evs[7].Cursor); len(got) != 0 {
		t.Fatalf("Events(last) = %s, want none", kinds(got))
	}
	if got := kinds(events(t, sp, evs[5].Cursor)); got != "expire@10.0.0.1 expire@10.0.0.2" && got != "expire@10.0.0.2 expire@10.0.0.1" {
		t.Fatalf("Events(6) = %s, want the two expiries", got)
	}
	// A space of another namespace sharing the ban namespace shares the
	// journal; one of its own does not.
	shared, err := s.Space(Scope{Namespace: "other:", BanNamespace: "ns:", Limits: *lim})
	if err != nil {
		t.Fatal(err)
	}
	if got := events(t, shared, ""); len(got) != len(evs) {
		t.Fatalf("a space of the same ban namespace reads %d events, want %d", len(got), len(evs))
	}
	if got := events(t, memSpaceFor(t, s, "apart:", lim), ""); len(got) != 0 {
		t.Fatalf("another ban namespace's journal = %s, want empty", kinds(got))
	}
}

// A cursor that does not parse, or that the journal never wrote, is an
// error quoting it; one trimmed away is ErrCursorGone.
func TestJournalCursors(t *testing.T) {
	s, clk := newTestMemoryStore(t, MemoryOptions{JournalLength: 3, JournalAge: time.Hour})
	sp := memSpaceFor(t, s, "ns:", testLimits())
	j := sp.(store.Journal)
	ctx := t.Context()
	c := func(n int) string { return strconv.FormatUint(s.journalStart()+uint64(n-1), 10) } // the cursor of event n
	for i := range 5 {
		if _, err := sp.AddBan(ctx, Ban{Key: addrKeyFor(i), Source: SourceManual}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := events(t, sp, ""); len(got) != 3 || got[0].Cursor != c(3) || got[2].Cursor != c(5) {
		t.Fatalf("a journal of 3 after 5 events holds %s, want events 3 to 5", kinds(got))
	}
	if got := events(t, sp, c(2)); len(got) != 3 {
		t.Fatalf("Events(2) = %d events, want 3: none is missing after 2", len(got))
	}
	if got, err := j.Events(ctx, c(3), 1); err != nil || len(got) != 1 || got[0].Cursor != c(4) {
		t.Fatalf("Events(3, limit 1) = %+v, %v; want event 4", got, err)
	}
	if _, err := j.Events(ctx, c(1), 10); !errors.Is(err, store.ErrCursorGone) {
		t.Fatalf("Events(1) after it was trimmed = %v, want ErrCursorGone", err)
	}
	for _, bad := range []string{"x", "-1", "+3", "03", "3.0", " 3", "18446744073709551616", c(6), c(99)} {
		_, err := j.Events(ctx, bad, 10)
		if err == nil || errors.Is(err, store.ErrCursorGone) || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Fatalf("Events(%q) = %v, want an error quoting it", bad, err)
		}
	}
	if _, err := j.Events(ctx, "", 0); err == nil {
		t.Fatal("Events(limit 0) = nil error, want one")
	}
	clk.Advance(time.Hour)
	if got := events(t, sp, ""); len(got) != 0 {
		t.Fatalf("after JournalAge the journal holds %s, want nothing", kinds(got))
	}
	if got := events(t, sp, c(5)); len(got) != 0 {
		t.Fatalf("Events(5), the newest, after JournalAge = %s, want nothing and no error", kinds(got))
	}
	if _, err := j.Events(ctx, c(4), 10); !errors.Is(err, store.ErrCursorGone) {
		t.Fatalf("Events(4) after JournalAge = %v, want ErrCursorGone", err)
	}
	if _, err := sp.AddBan(ctx, Ban{Key: addrKeyFor(9), Source: SourceManual}, 0); err != nil {
		t.Fatal(err)
	}
	if got := events(t, sp, c(5)); len(got) != 1 || got[0].Cursor != c(6) {
		t.Fatalf("Events(5) = %s, want event 6", kinds(got))
	}
}

// An allowed request does no journal work: a Take and a TakePlan that ban
// nothing allocate nothing and leave the journal as it was.
func TestJournalHotPath(t *testing.T) {
	s, _ := newTestMemoryStore(t, MemoryOptions{})
	lim := testLimits()
	lim.BanLimit = -1
	sp := memSpaceFor(t, s, "ns:", lim)
	ctx := t.Context()
	k := addrKeyFor(7)
	a := k.Prefix.Addr()
	plan := mustPlan(t, "p", Quota{Name: "q", Limit: 1 << 40, Period: Monthly})
	sp.TakePlan(ctx, k, a, plan, 1, true)
	if n := testing.AllocsPerRun(500, func() { sp.Take(ctx, k, a, 1) }); n != 0 {
		t.Fatalf("Take allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(500, func() { sp.TakePlan(ctx, k, a, plan, 1, true) }); n != 0 {
		t.Fatalf("TakePlan allocates %v times, want 0", n)
	}
	if got := events(t, sp, ""); len(got) != 0 {
		t.Fatalf("journal after allowed requests = %s, want empty", kinds(got))
	}
}

// TestJournalBytes measures what the journal keeps per event, for
// Options.JournalLength's documentation: an entry, and the ban an event
// keeps alive once the table has let it go.
func TestJournalBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	const n = 50_000
	s, _ := newTestMemoryStore(t, MemoryOptions{JournalLength: 2 * n})
	sp := memSpaceFor(t, s, "ns:", testLimits())
	ctx := t.Context()
	before := heaptest.Live()
	for i := range n {
		k := addrKeyFor(i)
		if _, err := sp.AddBan(ctx, Ban{Key: k, Source: SourceManual, Reason: "abuse"}, 0); err != nil {
			t.Fatal(err)
		}
		sp.Lift(ctx, k)
	}
	after := heaptest.Live()
	per := float64(after-before) / (2 * n) // a ban and its lift: two events, one ban kept
	t.Logf("journal: %.0f bytes an event (%d entries of %d bytes, the lifted bans they keep)", per, 2*n, journalEntryBytes)
	if per > 140 {
		t.Fatalf("journal: %.0f bytes an event, want at most 140 (Options.JournalLength says so)", per)
	}
	if got := len(events(t, sp, "")); got != 2*n {
		t.Fatalf("journal holds %d events, want %d", got, 2*n)
	}
}

// A range's lift is journaled only once the range is out of the set a
// listing reads: a reader that finds the lift in the journal never then
// lists the range (a bouncer placed past the lift would keep it). The
// filler ranges make the set slow to rebuild, which is when a reader
// would find the two out of order.
func TestJournalRangeLiftAfterSet(t *testing.T) {
	s, _ := newTestMemoryStore(t, MemoryOptions{})
	sp := memSpaceFor(t, s, "ns:", testLimits())
	ctx := t.Context()
	for i := range 2000 {
		k := Key{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)}
		if _, err := sp.AddBan(ctx, Ban{Key: k, Range: true, Source: SourceManual}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	j := sp.(store.Journal)
	for i := range 20 {
		victim := Key{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 16, byte(i), 0}), 24)}
		if _, err := sp.AddBan(ctx, Ban{Key: victim, Range: true, Source: SourceManual}, time.Hour); err != nil {
			t.Fatal(err)
		}
		head := events(t, sp, "")
		cursor := head[len(head)-1].Cursor
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, _, err := sp.Lift(ctx, victim); err != nil {
				t.Error(err)
			}
		}()
		for lifted := false; !lifted; {
			evs, err := j.Events(ctx, cursor, 10)
			if err != nil {
				t.Fatal(err)
			}
			lifted = len(evs) > 0
			if !lifted {
				continue
			}
			bans, err := sp.Bans(ctx, store.BanFilter{Within: victim.Prefix})
			if err != nil {
				t.Fatal(err)
			}
			if len(bans) != 0 {
				t.Fatalf("Bans(within %s) after its lift is journaled = %v, want none", victim, bans)
			}
		}
		<-done
	}
}

// An allowlist entry's end is journaled once, by the sweep, never before
// its end; one removed before is a disallow, and not journaled again.
func TestJournalAllowExpire(t *testing.T) {
	s, clk := newTestMemoryStore(t, MemoryOptions{})
	sp := memSpaceFor(t, s, "ns:", testLimits())
	ctx := t.Context()
	al := sp.(store.Allowlist)
	short, long := addrKeyFor(1), Key{Prefix: netip.MustParsePrefix("192.0.2.0/24")}
	for _, e := range []struct {
		k      Key
		length time.Duration
	}{{short, time.Minute}, {long, time.Hour}} {
		if _, err := al.Allow(ctx, Ban{Key: e.k, Range: e.k.Prefix.Bits() < 32}, e.length); err != nil {
			t.Fatal(err)
		}
	}
	s.sweep()
	clk.Advance(time.Minute + time.Second)
	s.sweep()
	s.sweep()
	if _, ok, err := al.Disallow(ctx, long); !ok || err != nil {
		t.Fatalf("Disallow(%s) = %v, %v; want found", long, ok, err)
	}
	clk.Advance(time.Hour)
	s.sweep()
	evs := events(t, sp, "")
	if got, want := kinds(evs), "allow@10.0.0.1 allow@192.0.2.0/24 allow-expire@10.0.0.1 disallow@192.0.2.0/24"; got != want {
		t.Fatalf("journal = %s\nwant      %s", got, want)
	}
	if e := evs[2]; e.Time.Before(e.Ban.Expires) {
		t.Fatalf("%s journaled at %v, before its end %v", e.Kind, e.Time, e.Ban.Expires)
	}
}
