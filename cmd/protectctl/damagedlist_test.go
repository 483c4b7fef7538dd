package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/store"
)

// damagedStore is a memory store whose ban listings also hold damaged
// records, as a store outside the process reports them.
type damagedStore struct {
	protect.Store
	damaged []protect.Ban
}

func (s damagedStore) Space(sc store.Scope) (store.Space, error) {
	sp, err := s.Store.Space(sc)
	return damagedSpace{sp, s.damaged}, err
}

type damagedSpace struct {
	store.Space
	damaged []protect.Ban
}

func (s damagedSpace) Bans(ctx context.Context, f protect.BanFilter) ([]protect.Ban, error) {
	bans, err := s.Space.Bans(ctx, f)
	return append(bans, s.damaged...), err
}

func mustKey(t *testing.T, s string) protect.Key {
	t.Helper()
	k, err := protect.ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A damaged key record and a damaged range record beside a temporary and
// a permanent ban: protectctl bans lists all four, the bans that expire
// first and the damaged records as malformed, on a memory store through
// the admin API, and on Redis both directly and through the API.
func TestBansListDamaged(t *testing.T) {
	type setup struct {
		ctl  func(args ...string) (int, string, string)
		bad  [2]string // the table's text for the damaged key, range
		keys []string  // the -json listing's keys, in order
	}
	cases := map[string]func(t *testing.T) setup{
		"memory-api": func(t *testing.T) setup {
			clock := (&fakeClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}).Now
			mem := protect.NewMemoryStore(protect.MemoryOptions{Clock: clock})
			t.Cleanup(func() { mem.Close() })
			store := damagedStore{mem, []protect.Ban{
				{Key: mustKey(t, "198.18.7.21"), Malformed: `not a ban record: "garbage"`},
				{Key: mustKey(t, "198.18.0.0/16"), Range: true, Malformed: `offense "x": not a number`},
			}}
			p, err := protect.New(protect.Config{Store: store, Clock: clock, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			srv := httptest.NewServer(admin.Handler(p))
			t.Cleanup(srv.Close)
			return setup{
				ctl: func(args ...string) (int, string, string) { return ctlServer(t, srv.URL, args...) },
				bad: [2]string{`not a ban record: "garbage"`, `offense "x": not a number`},
			}
		},
	}
	for name, mk := range servers(t) {
		for _, api := range []bool{false, true} {
			n := name + map[bool]string{false: "-direct", true: "-api"}[api]
			cases[n] = func(t *testing.T) setup {
				s := mk(t)
				sv := newService(t, s, protect.Config{})
				ctx := t.Context()
				s.c.Set(ctx, s.ns+"{198.18.7.21}:b", "garbage", 0)
				sv.verify(t, "198.18.7.21") // indexes the record
				s.c.HSet(ctx, s.ns+"ranges", "198.18.0.0/16", "1|99999999999999|x|auto||r")
				st := setup{bad: [2]string{`1 fields of the 6 of created|expires|offense|source|by|reason: "garbage"`,
					`offense "x": not a decimal number: "1|99999999999999|x|auto||r"`}}
				if !api {
					st.ctl = func(args ...string) (int, string, string) { return ctl(t, s, args...) }
					return st
				}
				srv := httptest.NewServer(admin.Handler(sv.p))
				t.Cleanup(srv.Close)
				st.ctl = func(args ...string) (int, string, string) { return ctlServer(t, srv.URL, args...) }
				return st
			}
		}
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			st := mk(t)
			for _, args := range [][]string{
				{"ban", "-for", "2h", "-reason", "scanner", "-by", "bob", "192.0.2.1"},
				{"ban", "-permanent", "-reason", "fraud", "-by", "bob", "consumer:x"},
			} {
				if code, out, errs := st.ctl(args...); code != 0 {
					t.Fatalf("protectctl %v = exit %d\n%s%s", args, code, out, errs)
				}
			}
			code, out, errs := st.ctl("bans")
			want := []string{
				"KEY SOURCE REASON BY CREATED EXPIRES LEFT OFFENSE",
				"192.0.2.1 manual scanner bob TIME TIME DUR 0",
				"x manual fraud bob TIME never permanent 0",
				"198.18.0.0/16 malformed " + st.bad[1] + " - - - - -",
				"198.18.7.21 malformed " + st.bad[0] + " - - - - -",
			}
			if got := strings.Split(strings.TrimSpace(normalize(out)), "\n"); code != 0 || !slices.Equal(got, want) {
				t.Fatalf("protectctl bans = exit %d\n%s%s\nwant exit 0 and\n%s", code, out, errs, strings.Join(want, "\n"))
			}
			code, out, errs = st.ctl("bans", "-json")
			if code != 0 {
				t.Fatalf("protectctl bans -json = exit %d\n%s%s", code, out, errs)
			}
			var recs []admin.BanRecord
			decodeJSON(t, out, &recs)
			var got []string
			for _, r := range recs {
				got = append(got, r.Key+" "+map[bool]string{true: "malformed " + r.Malformed, false: r.Source}[r.Malformed != ""])
			}
			wantJSON := []string{"192.0.2.1 manual", "x manual", "198.18.0.0/16 malformed " + st.bad[1], "198.18.7.21 malformed " + st.bad[0]}
			if !slices.Equal(got, wantJSON) {
				t.Fatalf("protectctl bans -json = %q, want %q", got, wantJSON)
			}
		})
	}
}

func decodeJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("json.Unmarshal(%q) = %v", s, err)
	}
}
