package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/internal/testclock"
	"github.com/httpprotect/protect/redisstore"
	"github.com/httpprotect/protect/store"
)

// cutWriter is a bouncer's connection that breaks as the answer's end is
// written: before it reports the failure, meanwhile runs (what other
// pulls do while the answer is stuck in the network).
type cutWriter struct {
	*httptest.ResponseRecorder
	meanwhile func()
}

func (w *cutWriter) Write(b []byte) (int, error) {
	if w.meanwhile != nil {
		w.meanwhile()
		w.meanwhile = nil
	}
	return 0, errors.New("connection reset by peer")
}

// pullCut is a pull of key on connection conn whose answer is cut.
func (r *lapiRig) pullCut(t *testing.T, conn uint64, path, key string, meanwhile func()) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req = req.WithContext(context.WithValue(req.Context(), lapiConnKey{}, conn))
	req.Header.Set("X-Api-Key", key)
	r.h.ServeHTTP(&cutWriter{ResponseRecorder: httptest.NewRecorder(), meanwhile: meanwhile}, req)
}

// TestLAPICutAnswerKeepsNewerPlace: an answer cut after its place was
// saved puts the place back only if no other pull of the key saved one
// since. Here a startup pull hangs, the bouncer gives up on it and pulls
// again on a new connection (startup, then an ordinary pull), and only
// then is the first cut: a lift made after must still reach the
// bouncer, as a deletion, not be lost in a full answer.
func TestLAPICutAnswerKeepsNewerPlace(t *testing.T) {
	for _, first := range []string{"?startup=true", ""} {
		t.Run("first pull "+first, func(t *testing.T) {
			r := newLAPIRig(t)
			const path = "/v1/decisions/stream"
			b := r.ban(t, "203.0.113.9", protect.BanOptions{For: time.Hour})
			d := dec(b, "Ip", "203.0.113.9", "manual", "1h0m0s", "2026-11-29T13:00:00Z")
			r.pullCut(t, 10, path+first, keyA, func() {
				r.getOn(t, 20, path+"?startup=true", keyA, 200, stream(nil, []string{d}))
				r.getOn(t, 20, path, keyA, 200, stream(nil, nil))
			})
			if _, err := r.p.Lift(context.Background(), "203.0.113.9", "test"); err != nil {
				t.Fatal(err)
			}
			r.getOn(t, 20, path, keyA, 200, stream([]string{d}, nil))
		})
	}
}

// TestLAPICutAnswerAlone: an answer cut with no other pull meanwhile
// leaves the place where it was, so that the next pull, on a new
// connection, is answered as if the cut one never was: a change sent on
// one connection and not yet confirmed (no pull after it there) is sent
// again, not taken as read because a pull on another connection was cut.
func TestLAPICutAnswerAlone(t *testing.T) {
	r := newLAPIRig(t)
	const path = "/v1/decisions/stream"
	b := r.ban(t, "203.0.113.9", protect.BanOptions{For: time.Hour})
	d := dec(b, "Ip", "203.0.113.9", "manual", "1h0m0s", "2026-11-29T13:00:00Z")
	r.getOn(t, 10, path+"?startup=true", keyA, 200, stream(nil, []string{d}))
	if _, err := r.p.Lift(context.Background(), "203.0.113.9", "test"); err != nil {
		t.Fatal(err)
	}
	r.getOn(t, 10, path, keyA, 200, stream([]string{d}, nil)) // sent, not yet confirmed
	r.pullCut(t, 11, path, keyA, nil)
	r.getOn(t, 12, path, keyA, 200, stream([]string{d}, nil))
	r.getOn(t, 12, path, keyA, 200, stream(nil, nil))
}

// TestLAPIPlaceUnreadable: a place whose cursor this journal never wrote
// (a place saved on another store, or before the journal lost its
// events) is answered in full, and counted as lost, not refused with a
// 500 for as long as the place is kept; and after a Redis that lost
// everything, startup pulls are answered again at once.
func TestLAPIPlaceUnreadable(t *testing.T) {
	t.Run("foreign cursor", func(t *testing.T) {
		r := newLAPIRig(t)
		const path = "/v1/decisions/stream"
		b := r.ban(t, "203.0.113.9", protect.BanOptions{For: time.Hour})
		d := dec(b, "Ip", "203.0.113.9", "manual", "1h0m0s", "2026-11-29T13:00:00Z")
		r.get(t, path+"?startup=true", keyA, 200, stream(nil, []string{d}))
		place := `{"acked":{"cursor":"1796523469752051-0"},"sent":{"cursor":"99999999999999999999"},"conn":""}`
		bm := r.p.Space().(store.Bookmarks)
		if err := bm.SetBookmark(context.Background(), bookmarkName(sha256.Sum256([]byte(keyA))), place, time.Hour); err != nil {
			t.Fatal(err)
		}
		r.getOn(t, 30, path, keyA, 200, stream(nil, []string{d}))
		if got := r.h.lost.Load(); got != 1 {
			t.Errorf("lost = %d, want 1", got)
		}
		r.getOn(t, 30, path, keyA, 200, stream(nil, nil))
	})
	t.Run("redis lost everything", func(t *testing.T) {
		m := miniredis.RunT(t)
		rc := redistest.Dial(m.Addr())
		t.Cleanup(func() { rc.Close() })
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		st := redisstore.New(rc, redisstore.Options{Logger: quiet, RangeRefresh: -1})
		t.Cleanup(func() { st.Close() })
		clock := testclock.New()
		p, err := protect.New(protect.Config{Store: st, Logger: quiet, Clock: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		r := &lapiRig{p: p, clock: clock, h: lapiOf(p, nil, []string{keyA}, clock.Now, quiet)}
		const path = "/v1/decisions/stream"
		r.ban(t, "203.0.113.9", protect.BanOptions{For: time.Hour})
		req := httptest.NewRequest("GET", path+"?startup=true", nil)
		req.Header.Set("X-Api-Key", keyA)
		w := httptest.NewRecorder()
		r.h.ServeHTTP(w, req)
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"value":"203.0.113.9"`) {
			t.Fatalf("startup pull = %d %s, want 200 and 203.0.113.9", w.Code, w.Body)
		}
		m.FlushAll()
		r.getOn(t, 11, path+"?startup=true", keyA, 200, stream(nil, nil))
		r.getOn(t, 11, path, keyA, 200, stream(nil, nil))
	})
}
