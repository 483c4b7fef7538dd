package protect_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/logtest"
)

// hundred is a list of 100 addresses, 192.0.2.0 to 192.0.2.99.
func hundred(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "192.0.2.%d\n", i)
	}
	return b.String()
}

// notLoaded returns the warnings that a list's load was refused.
func notLoaded(rec *logtest.Recorder) []map[string]string {
	var out []map[string]string
	for _, r := range rec.Records() {
		if r["msg"] == "protect: block list not loaded; the last good set stays in force" {
			out = append(out, r)
		}
	}
	return out
}

// A URL list that answers 200 with far fewer entries than the set in
// force (nothing, comments alone, fewer than MinShare of them) keeps its
// set, is counted and logged as a warning, and leaves its cached copy
// alone, so that a restart with the server down still starts with it.
// An answer with half of them or more is taken, and so is any answer
// of a list whose MinShare is negative.
func TestBlockListURLShrinkKeepsLastSet(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		minShare float64
		want     string // the refusal; "" when the answer is taken
		entries  int    // in force after it
	}{
		{"empty", "", 0, "0 entries, fewer than 0.5 of the 100 in force (MinShare)", 100},
		{"comments", "# firehol\n# nothing today\n", 0, "0 entries, fewer than 0.5 of the 100 in force (MinShare)", 100},
		{"49 of 100", hundred(49), 0, "49 entries, fewer than 0.5 of the 100 in force (MinShare)", 100},
		{"50 of 100", hundred(50), 0, "", 50},
		{"90 of 100 at 0.95", hundred(90), 0.95, "90 entries, fewer than 0.95 of the 100 in force (MinShare)", 100},
		{"empty, MinShare -1", "", -1, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			body := hundred(100)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				w.Write([]byte(body))
			}))
			t.Cleanup(srv.Close)
			cache := filepath.Join(t.TempDir(), "list.cache")
			rec := &logtest.Recorder{}
			cfg := protect.Config{Logger: slog.New(rec), BlockLists: []protect.BlockList{
				{Name: "list", URL: srv.URL + "/list.txt", Cache: cache, MinShare: tt.minShare}}}
			p, err := protect.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.ReloadBlockLists(t.Context()); err != nil {
				t.Fatal(err)
			}
			if st := p.Stats().BlockLists[0]; st.Entries != 100 || !st.Up {
				t.Fatalf("Stats().BlockLists[0] = %+v, want 100 entries, up", st)
			}
			mu.Lock()
			body = tt.body
			mu.Unlock()
			err = p.ReloadBlockLists(t.Context())
			wantErr := ""
			if tt.want != "" {
				wantErr = fmt.Sprintf("protect: block list %q (%s): %s", "list", srv.URL+"/list.txt", tt.want)
			}
			if got := fmt.Sprint(err); (err == nil) != (wantErr == "") || err != nil && got != wantErr {
				t.Errorf("ReloadBlockLists() = %v, want %q", err, wantErr)
			}
			wantSt := protect.BlockListStats{Name: "list", Entries: tt.entries, Up: true}
			if tt.want != "" {
				wantSt.Errors, wantSt.Up = 1, false
			}
			if st := p.Stats().BlockLists[0]; st.Name != wantSt.Name || st.Entries != wantSt.Entries || st.Errors != wantSt.Errors || st.Up != wantSt.Up {
				t.Errorf("Stats().BlockLists[0] = %+v, want %d entries, %d errors, up %v", st, wantSt.Entries, wantSt.Errors, wantSt.Up)
			}
			if logged := notLoaded(rec); tt.want == "" && len(logged) != 0 ||
				tt.want != "" && (len(logged) != 1 || logged[0]["level"] != "WARN" || logged[0]["list"] != "list" || logged[0]["entries"] != "100" || logged[0]["err"] != wantErr) {
				t.Errorf("refusals logged = %v, want one WARN with err %q", logged, wantErr)
			}
			p.Close()
			srv.Close()

			// A restart with the server down comes up with the copy.
			p, err = protect.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			if n := p.Stats().BlockLists[0].Entries; n != tt.entries {
				t.Errorf("entries after a restart from the cache = %d, want %d", n, tt.entries)
			}
		})
	}
}

// A file list rewritten with far fewer entries is refused as a URL's
// answer is: a cron job whose download failed may leave an empty file.
// MinShare -1 takes it, for a file emptied on purpose.
func TestBlockListFileShrinkKeepsLastSet(t *testing.T) {
	for _, minShare := range []float64{0, -1} {
		t.Run(fmt.Sprint(minShare), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "list.txt")
			writeList(t, path, hundred(100))
			p, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler),
				BlockLists: []protect.BlockList{{Name: "list", Path: path, MinShare: minShare}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			writeList(t, path, "# emptied\n")
			err = p.ReloadBlockLists(t.Context())
			want, entries := fmt.Sprintf(`protect: block list "list" (%s): 0 entries, fewer than 0.5 of the 100 in force (MinShare)`, path), 100
			if minShare < 0 {
				want, entries = "<nil>", 0
			}
			if fmt.Sprint(err) != want {
				t.Errorf("ReloadBlockLists() = %v, want %s", err, want)
			}
			if n := p.Stats().BlockLists[0].Entries; n != entries {
				t.Errorf("entries after the emptied file = %d, want %d", n, entries)
			}
		})
	}
}

// CheckCoverage judges the set whole: two entries that each pass the
// line check may together cover a family.
func TestBlockSetCoverage(t *testing.T) {
	// FireHOL level 1's reserved networks, the widest part of the widest
	// common list: 13.8% of IPv4.
	firehol := []string{"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/3"}
	const v4 = "covers too much of an address family: %s of IPv4 (half or more is refused)"
	const v6 = "covers too much of an address family: %s of IPv6's global unicast space 2000::/3 (half or more is refused)"
	tests := []struct {
		name    string
		entries []string
		want    string
	}{
		{"two /1", []string{"0.0.0.0/1", "128.0.0.0/1"}, fmt.Sprintf(v4, "100.0%")},
		{"one /1", []string{"128.0.0.0/1"}, fmt.Sprintf(v4, "50.0%")},
		{"mapped /97", []string{"::ffff:0.0.0.0/97"}, fmt.Sprintf(v4, "50.0%")},
		{"/2 and /3", []string{"0.0.0.0/2", "64.0.0.0/3", "10.0.0.0/8"}, ""},
		{"just under half", []string{"0.0.0.0/2", "64.0.0.0/3", "96.0.0.0/4", "112.0.0.0/5", "120.0.0.0/6", "124.0.0.0/7", "126.0.0.0/8"}, ""},
		{"two IPv6 /1", []string{"::/1", "8000::/1"}, fmt.Sprintf(v6, "100.0%")},
		{"::/1", []string{"::/1"}, fmt.Sprintf(v6, "100.0%")},
		{"2000::/4", []string{"2000::/4", "2001:db8::/32"}, fmt.Sprintf(v6, "50.0%")},
		{"2000::/5", []string{"2000::/5", "fc00::/7", "fe80::/10", "ff00::/8", "::/8"}, ""},
		{"FireHOL level 1 reserved", firehol, ""},
	}
	for _, tt := range tests {
		var entries []protect.BlockEntry
		for _, s := range tt.entries {
			entries = append(entries, protect.BlockEntry{Prefix: netip.MustParsePrefix(s)})
		}
		err := protect.NewBlockSet(entries).CheckCoverage()
		if got := fmt.Sprint(err); (err == nil) != (tt.want == "") || err != nil && got != tt.want {
			t.Errorf("%s: CheckCoverage() = %v, want %q", tt.name, err, tt.want)
		}
	}
}

// A rewrite of a file list whose entries together cover a family is
// refused whole, logged with the list's name, and the last set stays.
func TestBlockListTooWideKeepsLastSet(t *testing.T) {
	for _, wide := range []string{"0.0.0.0/1\n128.0.0.0/1\n", "::/1\n8000::/1\n"} {
		path := filepath.Join(t.TempDir(), "list.txt")
		writeList(t, path, "192.0.2.7\n")
		rec := &logtest.Recorder{}
		p, err := protect.New(protect.Config{Logger: slog.New(rec),
			BlockLists: []protect.BlockList{{Name: "mine", Path: path, MinShare: -1}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		writeList(t, path, wide+"192.0.2.8\n")
		err = p.ReloadBlockLists(t.Context())
		family := "100.0% of IPv4"
		if strings.Contains(wide, "::") {
			family = "100.0% of IPv6's global unicast space 2000::/3"
		}
		want := fmt.Sprintf(`protect: block list "mine" (%s): covers too much of an address family: %s (half or more is refused)`, path, family)
		if fmt.Sprint(err) != want {
			t.Errorf("ReloadBlockLists() = %v, want %s", err, want)
		}
		for addr, st := range map[string]protect.Status{"192.0.2.7": protect.Blocked, "192.0.2.8": protect.Allowed, "2001:db8::1": protect.Allowed} {
			if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr(addr)); d.Status != st {
				t.Errorf("VerifyAddr(%s) after a too-wide rewrite = %v, want %v", addr, d.Status, st)
			}
		}
		if logged := notLoaded(rec); len(logged) != 1 || logged[0]["list"] != "mine" || logged[0]["err"] != want || logged[0]["level"] != "WARN" {
			t.Errorf("refusals logged = %v, want one WARN naming mine", logged)
		}
	}
}
