package protect_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/logtest"
	"github.com/httpprotect/protect/internal/testclock"
	"github.com/httpprotect/protect/redisstore"
	"github.com/redis/go-redis/v9"
)

// writeList writes a list file and moves its modification time on, so
// that a rewrite within one tick of the file system's clock is seen.
func writeList(t *testing.T, path, body string) {
	t.Helper()
	old, _ := os.Stat(path)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if old != nil {
		mt := old.ModTime().Add(time.Second)
		if err := os.Chtimes(path, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

// A listed address is refused as Blocked (403, code blocked, no
// Retry-After) with no store call at all; a safe network inside a listed
// range still passes; every other address is counted as before.
func TestBlockListsRefuseBeforeTheStore(t *testing.T) {
	dir := t.TempDir()
	mine, drop := filepath.Join(dir, "mine.txt"), filepath.Join(dir, "drop.txt")
	writeList(t, mine, "192.0.2.7\n198.51.100.0/24\n")
	b, err := os.ReadFile("blocklist/testdata/blocklists/drop.txt")
	if err != nil {
		t.Fatal(err)
	}
	writeList(t, drop, string(b))
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	s := redisstore.New(c, redisstore.Options{RangeRefresh: -1, Logger: slog.New(slog.DiscardHandler)})
	p, err := protect.New(protect.Config{
		Store: s, Logger: slog.New(slog.DiscardHandler), MaxRequests: 5,
		SafeNetworks: []string{"198.51.100.128/25"},
		BlockLists: []protect.BlockList{
			{Name: "mine", Path: mine},
			{Name: "drop", Path: drop, Format: protect.FormatSpamhaus},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); s.Close() })
	h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	before := m.CommandCount()
	tests := []struct {
		addr, list, entry, note string
	}{
		{"192.0.2.7", "mine", "192.0.2.7/32", ""},
		{"198.51.100.9", "mine", "198.51.100.0/24", ""},
		{"1.10.17.5", "drop", "1.10.16.0/20", "SBL256894"},
		{"::ffff:1.10.17.5", "drop", "1.10.16.0/20", "SBL256894"},
	}
	for _, tt := range tests {
		for range 3 { // a flood: each request is refused, none reaches the store
			d, err := p.VerifyAddr(t.Context(), netip.MustParseAddr(tt.addr))
			if err != nil || d.Status != protect.Blocked || d.StatusCode() != 403 || d.Ban == nil {
				t.Fatalf("VerifyAddr(%s) = %v %d, %v; want blocked 403", tt.addr, d.Status, d.StatusCode(), err)
			}
			if d.Ban.By != tt.list || d.Ban.Key.String() != strings.TrimSuffix(tt.entry, "/32") || d.Ban.Reason != tt.note || d.Ban.Source != protect.SourceList {
				t.Errorf("VerifyAddr(%s).Ban = %+v, want list %s entry %s note %q", tt.addr, *d.Ban, tt.list, tt.entry, tt.note)
			}
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = netip.AddrPortFrom(netip.MustParseAddr(tt.addr), 4000).String()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var body struct{ Code string }
		json.Unmarshal(w.Body.Bytes(), &body)
		if w.Code != 403 || body.Code != "blocked" || w.Header().Get("Retry-After") != "" ||
			w.Header().Get("Content-Type") != "application/problem+json" || w.Header().Get("Ratelimit") != "" {
			t.Errorf("GET from %s = %d %q, Retry-After %q, header %v; want 403 blocked, no Retry-After", tt.addr, w.Code, body.Code, w.Header().Get("Retry-After"), w.Header())
		}
	}
	if got := m.CommandCount() - before; got != 0 {
		t.Errorf("listed addresses cost the store %d commands, want 0", got)
	}
	if st := p.Stats(); st.StoreCalls != 0 || st.Decisions[protect.Blocked] != 16 {
		t.Errorf("Stats() = %d store calls, %d blocked; want 0, 16", st.StoreCalls, st.Decisions[protect.Blocked])
	}

	if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("198.51.100.200")); d.Status != protect.Safe {
		t.Errorf("VerifyAddr(198.51.100.200) = %v, want safe: a safe network wins over a list", d.Status)
	}
	for i := range int64(2) {
		d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("203.0.113.9"))
		if d.Status != protect.Allowed || d.Count != i+1 {
			t.Errorf("VerifyAddr(203.0.113.9) #%d = %v count %d, want allowed %d", i+1, d.Status, d.Count, i+1)
		}
	}
	if st := p.Stats(); st.StoreCalls != 2 {
		t.Errorf("Stats().StoreCalls = %d, want 2", st.StoreCalls)
	}

	matches := p.BlockListMatches(netip.MustParseAddr("198.51.100.7"))
	want := []protect.ListMatch{{List: "mine", Source: mine, Entry: netip.MustParsePrefix("198.51.100.0/24")}}
	if len(matches) != 1 || matches[0] != want[0] {
		t.Errorf("BlockListMatches(198.51.100.7) = %+v, want %+v", matches, want)
	}
	if got := p.BlockListMatches(netip.MustParseAddr("203.0.113.9")); got != nil {
		t.Errorf("BlockListMatches(203.0.113.9) = %+v, want nil", got)
	}
	// Lists are not bans: the store's ban list holds none of them, and
	// a lift lifts nothing.
	bans, err := p.Bans(t.Context(), protect.BanFilter{})
	if err != nil || len(bans) != 0 {
		t.Errorf("Bans() = %v, %v; want none", bans, err)
	}
	if lifted, err := p.Lift(t.Context(), "192.0.2.7", "test"); err != nil || len(lifted) != 0 {
		t.Errorf("Lift(192.0.2.7) = %v, %v; want nothing lifted", lifted, err)
	}
	if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.7")); d.Status != protect.Blocked {
		t.Errorf("VerifyAddr(192.0.2.7) after a lift = %v, want blocked", d.Status)
	}
}

// Rewriting the file moves the decision at the next check; a broken
// rewrite keeps the last good set, fails once in the log and in Stats,
// and a good one after it is loaded again.
func TestBlockListReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.txt")
	writeList(t, path, "192.0.2.7\n")
	clock := testclock.New()
	rec := &logtest.Recorder{}
	p, err := protect.New(protect.Config{Logger: slog.New(rec), Clock: clock.Now,
		BlockLists: []protect.BlockList{{Name: "list", Path: path}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	status := func(addr string) protect.Status {
		d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr(addr))
		return d.Status
	}
	stats := func() protect.BlockListStats {
		t.Helper()
		st := p.Stats().BlockLists
		if len(st) != 1 {
			t.Fatalf("Stats().BlockLists = %v, want one", st)
		}
		return st[0]
	}
	if status("192.0.2.7") != protect.Blocked || status("192.0.2.8") != protect.Allowed {
		t.Fatalf("before the rewrite: 192.0.2.7 %v, 192.0.2.8 %v; want blocked, allowed", status("192.0.2.7"), status("192.0.2.8"))
	}

	writeList(t, path, "192.0.2.8\n")
	clock.Advance(10 * time.Second)
	if err := p.ReloadBlockLists(t.Context()); err != nil {
		t.Fatal(err)
	}
	if status("192.0.2.7") != protect.Allowed || status("192.0.2.8") != protect.Blocked {
		t.Errorf("after the rewrite: 192.0.2.7 %v, 192.0.2.8 %v; want allowed, blocked", status("192.0.2.7"), status("192.0.2.8"))
	}
	if st := stats(); st != (protect.BlockListStats{Name: "list", Entries: 1, Up: true, Age: 0}) {
		t.Errorf("Stats().BlockLists[0] = %+v, want 1 entry, up, age 0", st)
	}

	writeList(t, path, "<html>\n<body>Not Found</body>\n192.0.2.9\n</html>\n")
	clock.Advance(10 * time.Second)
	err = p.ReloadBlockLists(t.Context())
	if err == nil || !strings.Contains(err.Error(), `3 of 4 lines bad, first line 1: "<html>"`) {
		t.Errorf("ReloadBlockLists after a broken rewrite = %v, want its first bad line", err)
	}
	clock.Advance(10 * time.Second)
	if err := p.ReloadBlockLists(t.Context()); err != nil { // unchanged: not read again
		t.Errorf("ReloadBlockLists of the unchanged broken file = %v, want nil", err)
	}
	if status("192.0.2.8") != protect.Blocked || status("192.0.2.9") != protect.Allowed {
		t.Errorf("after a broken rewrite: 192.0.2.8 %v, 192.0.2.9 %v; want the last good set", status("192.0.2.8"), status("192.0.2.9"))
	}
	if st := stats(); st != (protect.BlockListStats{Name: "list", Entries: 1, Errors: 1, Up: false, Age: 20 * time.Second}) {
		t.Errorf("Stats().BlockLists[0] = %+v, want 1 entry, 1 error, down, age 20s", st)
	}
	if n := rec.Count("protect: block list not loaded; the last good set stays in force"); n != 1 {
		t.Errorf("the failed load was logged %d times, want 1", n)
	}

	writeList(t, path, "192.0.2.9\nnot-an-address\n")
	if err := p.ReloadBlockLists(t.Context()); err != nil {
		t.Fatal(err)
	}
	if status("192.0.2.9") != protect.Blocked {
		t.Errorf("after a good rewrite: 192.0.2.9 %v, want blocked", status("192.0.2.9"))
	}
	if n := rec.Count("protect: block list: bad line skipped"); n != 1 {
		t.Errorf("the skipped line was logged %d times, want 1", n)
	}
	if st := stats(); !st.Up || st.Age != 0 {
		t.Errorf("Stats().BlockLists[0] = %+v, want up, age 0", st)
	}
}

// A URL list is fetched with a conditional GET, and its last good copy
// starts the next protector while the server is down.
func TestBlockListURL(t *testing.T) {
	var gets, conditional atomic.Int32
	var broken atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		if broken.Load() {
			http.Error(w, "down for maintenance", http.StatusInternalServerError)
			return
		}
		if r.Header.Get("User-Agent") == "" || !strings.HasPrefix(r.Header.Get("User-Agent"), "protect-blocklist/") {
			t.Errorf("User-Agent = %q", r.Header.Get("User-Agent"))
		}
		if r.Header.Get("If-None-Match") == `"v1"` {
			conditional.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		w.Write([]byte("; drop\n203.0.113.0/24 ; SBL1\n"))
	}))
	cache := filepath.Join(t.TempDir(), "drop.cache")
	list := protect.BlockList{Name: "drop", URL: srv.URL + "/drop.txt", Format: protect.FormatSpamhaus, Cache: cache}
	cfg := protect.Config{Logger: slog.New(slog.DiscardHandler), BlockLists: []protect.BlockList{list}}
	p, err := protect.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// New fetches at once, off the request path: wait for that first copy.
	for i := 0; p.Stats().BlockLists[0].Entries == 0; i++ {
		if i == 500 {
			t.Fatal("the first fetch did not load the list")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.ReloadBlockLists(t.Context()); err != nil {
		t.Fatal(err)
	}
	if gets.Load() != 2 || conditional.Load() != 1 {
		t.Errorf("%d GETs, %d conditional; want 2, 1", gets.Load(), conditional.Load())
	}
	broken.Store(true)
	if err := p.ReloadBlockLists(t.Context()); err == nil || !strings.Contains(err.Error(), "500 Internal Server Error") {
		t.Errorf("ReloadBlockLists with the server failing = %v, want its 500", err)
	}
	if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("203.0.113.5")); d.Status != protect.Blocked {
		t.Errorf("VerifyAddr(203.0.113.5) with the server failing = %v, want blocked by the last good set", d.Status)
	}
	if st := p.Stats().BlockLists[0]; st.Up || st.Errors != 1 || st.Entries != 1 {
		t.Errorf("Stats().BlockLists[0] = %+v, want down, 1 error, 1 entry", st)
	}
	p.Close()
	srv.Close()

	p, err = protect.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("203.0.113.5"))
	if d.Status != protect.Blocked || d.Ban.Reason != "SBL1" {
		t.Errorf("VerifyAddr(203.0.113.5) from the cached copy = %v, want blocked by SBL1", d.Status)
	}
}

func TestBlockListConfigErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.txt")
	tests := []struct {
		list protect.BlockList
		want string
	}{
		{protect.BlockList{Path: "x"}, `BlockLists[0] "": Name`},
		{protect.BlockList{Name: "a"}, "give exactly one of Path, URL and Source"},
		{protect.BlockList{Name: "a", Path: "x", URL: "http://x"}, "give exactly one of Path, URL and Source"},
		{protect.BlockList{Name: "a", URL: "ftp://x"}, `URL "ftp://x": want http:// or https://`},
		{protect.BlockList{Name: "a", Path: missing}, "missing.txt"},
		{protect.BlockList{Name: "a", Path: missing, Refresh: time.Millisecond}, "Refresh 1ms: want at least 1s"},
		{protect.BlockList{Name: "a", Path: missing, Cache: "c"}, "Cache: only a URL list"},
	}
	for _, tt := range tests {
		_, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler), BlockLists: []protect.BlockList{tt.list}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want an error with %q", tt.list, err, tt.want)
		}
	}
}

// The poller reads a rewritten file by itself within a Refresh or two,
// with no call of ReloadBlockLists.
func TestBlockListPollsItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.txt")
	writeList(t, path, "192.0.2.7\n")
	p, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler),
		BlockLists: []protect.BlockList{{Name: "list", Path: path, Refresh: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	writeList(t, path, "192.0.2.8\n")
	deadline := time.Now().Add(3 * time.Second)
	for {
		d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.8"))
		if d.Status == protect.Blocked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("VerifyAddr(192.0.2.8) = %v 3s after the rewrite with Refresh 1s, want blocked", d.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A dry run decides Blocked, logs it, and serves the client.
func TestBlockListDryRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.txt")
	writeList(t, path, "192.0.2.7\n")
	rec := &logtest.Recorder{}
	p, err := protect.New(protect.Config{Logger: slog.New(rec), DryRun: true, Namespace: "dry:",
		BlockLists: []protect.BlockList{{Name: "list", Path: path}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.7"))
	if d.Status != protect.Blocked || d.Refused() || d.StatusCode() != 200 {
		t.Errorf("VerifyAddr(192.0.2.7) in a dry run = %v, refused %v, %d; want blocked, served, 200", d.Status, d.Refused(), d.StatusCode())
	}
	if n := rec.Count("protect: dry run: would refuse"); n != 1 {
		t.Errorf("%d would-refuse lines, want 1", n)
	}
	if st := p.Stats(); st.DryRunRefusals != 1 || st.Decisions[protect.Blocked] != 1 {
		t.Errorf("Stats() = %d dry-run refusals, %d blocked; want 1, 1", st.DryRunRefusals, st.Decisions[protect.Blocked])
	}
}
