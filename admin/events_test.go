package admin

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/memstore"
	"github.com/httpprotect/protect/store"
)

// eventServer serves the admin API of p, following journals every
// millisecond.
func eventServer(t *testing.T, p *protect.Protector) *httptest.Server {
	t.Helper()
	h := &handler{svc: NewService(p), log: slog.New(slog.DiscardHandler), poll: time.Millisecond}
	srv := httptest.NewServer(h.routes())
	t.Cleanup(srv.Close)
	return srv
}

func eventProtector(t *testing.T, st store.Store) *protect.Protector {
	t.Helper()
	p, err := protect.New(protect.Config{Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// getEvents asks GET /v1/events with query q and returns the status and
// the records of a 200, or the problem's code of another status.
func getEvents(t *testing.T, srv *httptest.Server, q url.Values) (int, []EventRecord, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + "/v1/events?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var p Problem
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatalf("GET /v1/events?%s = %d with a body that is no problem: %v", q.Encode(), resp.StatusCode, err)
		}
		return resp.StatusCode, nil, p.Code
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("GET /v1/events Content-Type = %q, want application/x-ndjson", ct)
	}
	var recs []EventRecord
	dec := json.NewDecoder(resp.Body)
	for {
		var r EventRecord
		if err := dec.Decode(&r); err == io.EOF {
			return resp.StatusCode, recs, ""
		} else if err != nil {
			t.Fatalf("GET /v1/events: line %d: %v", len(recs)+1, err)
		}
		recs = append(recs, r)
	}
}

// kindsKeys is "kind key" of each record, comma-separated.
func kindsKeys(recs []EventRecord) string {
	var b strings.Builder
	for i, r := range recs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r.Kind + " " + r.Key)
	}
	return b.String()
}

// GET /v1/events lists the journal as JSON lines, from a cursor on, and
// refuses what no journal wrote.
func TestEventsAPI(t *testing.T) {
	p := eventProtector(t, nil)
	srv := eventServer(t, p)
	ctx := t.Context()
	for _, target := range []string{"198.51.100.7", "2001:db8::/48"} {
		if _, err := p.Ban(ctx, target, protect.BanOptions{For: time.Hour, Reason: "test", By: "ops"}); err != nil {
			t.Fatalf("Ban(%q) = %v", target, err)
		}
	}
	if _, err := p.Lift(ctx, "198.51.100.7", "test"); err != nil {
		t.Fatalf("Lift = %v", err)
	}

	code, recs, _ := getEvents(t, srv, nil)
	want := "ban 198.51.100.7, ban 2001:db8::/48, lift 198.51.100.7"
	if got := kindsKeys(recs); code != http.StatusOK || got != want {
		t.Fatalf("GET /v1/events = %d, %q; want 200, %q", code, got, want)
	}
	if r := recs[1]; !r.Range || r.Reason != "test" || r.By != "ops" || r.Source != "manual" || r.Expires == nil || r.Cursor == "" {
		t.Fatalf("range ban event = %+v; want range, reason test, by ops, source manual, an end and a cursor", r)
	}
	_, recs2, _ := getEvents(t, srv, url.Values{"since": {recs[0].Cursor}})
	if got, want := kindsKeys(recs2), "ban 2001:db8::/48, lift 198.51.100.7"; got != want {
		t.Fatalf("GET /v1/events?since=%s = %q, want %q", recs[0].Cursor, got, want)
	}
	_, recs1, _ := getEvents(t, srv, url.Values{"limit": {"1"}})
	if got, want := kindsKeys(recs1), "ban 198.51.100.7"; got != want {
		t.Fatalf("GET /v1/events?limit=1 = %q, want %q", got, want)
	}
	_, end, _ := getEvents(t, srv, url.Values{"since": {recs[2].Cursor}})
	if len(end) != 0 {
		t.Fatalf("GET /v1/events?since=<newest> = %q, want nothing", kindsKeys(end))
	}

	bad := []struct {
		q    url.Values
		code int
		name string
	}{
		{url.Values{"since": {"not-a-cursor"}}, http.StatusBadRequest, CodeBadRequest},
		{url.Values{"since": {"18446744073709551615"}}, http.StatusBadRequest, CodeBadRequest}, // past the newest
		{url.Values{"limit": {"0"}}, http.StatusBadRequest, CodeBadRequest},
		{url.Values{"limit": {"10001"}}, http.StatusBadRequest, CodeBadRequest},
		{url.Values{"namespace": {"nowhere"}}, http.StatusNotFound, CodeUnknownNamespace},
	}
	for _, tt := range bad {
		if code, _, name := getEvents(t, srv, tt.q); code != tt.code || name != tt.name {
			t.Errorf("GET /v1/events?%s = %d, %q; want %d, %q", tt.q.Encode(), code, name, tt.code, tt.name)
		}
	}
}

// A trimmed cursor is 410, and a store without a journal 501.
func TestEventsAPIGoneAndNone(t *testing.T) {
	st := memstore.New(memstore.Options{JournalLength: 2})
	t.Cleanup(func() { st.Close() })
	p := eventProtector(t, st)
	srv := eventServer(t, p)
	for _, target := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4"} {
		if _, err := p.Ban(t.Context(), target, protect.BanOptions{}); err != nil {
			t.Fatalf("Ban(%q) = %v", target, err)
		}
	}
	_, recs, _ := getEvents(t, srv, nil)
	if got, want := kindsKeys(recs), "ban 198.51.100.3, ban 198.51.100.4"; got != want {
		t.Fatalf("GET /v1/events of a journal of 2 = %q, want %q", got, want)
	}
	if code, _, name := getEvents(t, srv, url.Values{"since": {"1"}}); code != http.StatusGone || name != CodeCursorGone {
		t.Fatalf("GET /v1/events?since=<trimmed> = %d, %q; want 410, %q", code, name, CodeCursorGone)
	}

	none := eventServer(t, eventProtector(t, plainStore{memstore.New(memstore.Options{})}))
	if code, _, name := getEvents(t, none, nil); code != http.StatusNotImplemented || name != CodeNoJournal {
		t.Fatalf("GET /v1/events of a store without journal = %d, %q; want 501, %q", code, name, CodeNoJournal)
	}
}

// plainStore is a Store whose spaces offer no optional capability.
type plainStore struct{ store.Store }

func (s plainStore) Space(sc store.Scope) (store.Space, error) {
	sp, err := s.Store.Space(sc)
	return struct{ store.Space }{sp}, err
}

// Asked for an event stream, GET /v1/events follows the journal: a ban
// written after the request arrives as a server-sent event, with its
// cursor as id; Last-Event-ID resumes after it.
func TestEventsAPIFollow(t *testing.T) {
	p := eventProtector(t, nil)
	srv := eventServer(t, p)
	ctx := t.Context()
	if _, err := p.Ban(ctx, "198.51.100.7", protect.BanOptions{}); err != nil {
		t.Fatal(err)
	}
	follow := func(lastID string) (*bufio.Scanner, func()) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/events", nil)
		req.Header.Set("Accept", "text/event-stream")
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("GET /v1/events (event stream) = %d, %q; want 200, text/event-stream", resp.StatusCode, ct)
		}
		return bufio.NewScanner(resp.Body), func() { resp.Body.Close() }
	}
	// next reads one event: its id, event and data lines.
	next := func(sc *bufio.Scanner) (id, kind string, rec EventRecord) {
		t.Helper()
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = line[4:]
			case strings.HasPrefix(line, "event: "):
				kind = line[7:]
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(line[6:]), &rec); err != nil {
					t.Fatalf("event data %q: %v", line, err)
				}
			case line == "" && kind != "":
				return id, kind, rec
			}
		}
		t.Fatalf("event stream ended: %v", sc.Err())
		return
	}

	sc, stop := follow("")
	id, kind, rec := next(sc)
	if kind != "ban" || rec.Key != "198.51.100.7" || id != rec.Cursor {
		t.Fatalf("first event = id %q, %s of %q (cursor %q); want a ban of 198.51.100.7 with its cursor as id", id, kind, rec.Key, rec.Cursor)
	}
	if _, err := p.Ban(ctx, "203.0.113.9", protect.BanOptions{}); err != nil {
		t.Fatal(err)
	}
	id2, kind, rec := next(sc)
	if kind != "ban" || rec.Key != "203.0.113.9" {
		t.Fatalf("event after a later ban = %s of %q; want ban of 203.0.113.9", kind, rec.Key)
	}
	stop()

	if _, err := p.Lift(ctx, "203.0.113.9", "test"); err != nil {
		t.Fatal(err)
	}
	sc, stop = follow(id2)
	defer stop()
	if _, kind, rec := next(sc); kind != "lift" || rec.Key != "203.0.113.9" {
		t.Fatalf("first event after Last-Event-ID %s = %s of %q; want lift of 203.0.113.9", id2, kind, rec.Key)
	}
}
