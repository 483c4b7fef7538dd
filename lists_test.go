package protect

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/httpprotect/protect/internal/blocktest"
	"github.com/httpprotect/protect/internal/heaptest"
	"github.com/httpprotect/protect/internal/logtest"
	"github.com/httpprotect/protect/internal/testclock"
	"github.com/httpprotect/protect/redisstore"
	"github.com/redis/go-redis/v9"
)

// staticSource is a BlockSource of one set; pointerSource is one that
// hands its set over, as a CrowdSec bouncer does.
type staticSource struct{ s *BlockSet }

func (s staticSource) BlockSet() *BlockSet { return s.s }

type pointerSource struct{ p atomic.Pointer[BlockSet] }

func (s *pointerSource) BlockSet() *BlockSet                        { return s.p.Load() }
func (s *pointerSource) BlockSetPointer() *atomic.Pointer[BlockSet] { return &s.p }

// BenchmarkVerifyAddrBlockLists measures the hot path of an unlisted
// address (10k keys, memory store) with no list and with 250k addresses
// and 100k ranges listed: what a list costs the requests it does not
// refuse.
func BenchmarkVerifyAddrBlockLists(b *testing.B) {
	ctx := context.Background()
	addrs := benchAddrs(10_000) // inside 11.0.0.0/16
	prefixes, _ := blocktest.Entries(250_000, 100_000)
	probe := netip.MustParsePrefix("11.0.0.0/16")
	var kept []BlockEntry
	for _, p := range prefixes {
		if !p.Overlaps(probe) {
			kept = append(kept, BlockEntry{Prefix: p})
		}
	}
	set := NewBlockSet(kept)
	ptr := &pointerSource{}
	ptr.p.Store(set)
	var file strings.Builder
	for _, e := range kept {
		file.WriteString(e.Prefix.String())
		file.WriteByte('\n')
	}
	path := filepath.Join(b.TempDir(), "big.txt")
	if err := os.WriteFile(path, []byte(file.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		lists []BlockList
	}{
		{"lists=0", nil},
		{"entries=350k/file", []BlockList{{Name: "big", Path: path}}},
		{"entries=350k/source", []BlockList{{Name: "big", Source: ptr}}},
		{"entries=350k/source-call", []BlockList{{Name: "big", Source: staticSource{set}}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := New(Config{MaxRequests: 1 << 62, BanLimit: -1, Logger: discardLogger(), BlockLists: bc.lists})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { p.Close() })
			for _, a := range addrs {
				p.VerifyAddr(ctx, a)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if d, _ := p.VerifyAddr(ctx, addrs[i]); d.Status != Allowed {
					b.Fatalf("VerifyAddr(%s) = %v, want allowed", addrs[i], d.Status)
				}
				if i++; i == len(addrs) {
					i = 0
				}
			}
		})
	}
}

// countingSource is a live source that counts the calls of BlockSet; with
// pointer set it also hands its set over (BlockSetPointer).
type countingSource struct {
	set   atomic.Pointer[BlockSet]
	calls atomic.Int64
}

func (s *countingSource) BlockSet() *BlockSet { s.calls.Add(1); return s.set.Load() }

type handingSource struct{ countingSource }

func (s *handingSource) BlockSetPointer() *atomic.Pointer[BlockSet] { return &s.set }

// A source that hands its set over is read without a call of BlockSet:
// requests load the set themselves, and see each set it stores. One
// that does not is asked on every request that reaches the step.
func TestBlockSetPointer(t *testing.T) {
	entries := make([]BlockEntry, 0, bigSet+1)
	for i := range bigSet {
		entries = append(entries, BlockEntry{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 15), byte(i >> 7), byte(i << 1)}), 32)})
	}
	entries = append(entries, BlockEntry{Prefix: netip.MustParsePrefix("203.0.113.0/24")})
	set := NewBlockSet(entries)
	handing, plain := &handingSource{}, &countingSource{}
	handing.set.Store(set)
	plain.set.Store(set)
	for _, tc := range []struct {
		name      string
		src       BlockSource
		calls     *atomic.Int64
		wantCalls int64 // for the four requests below
	}{
		{"BlockSetPointer", handing, &handing.calls, 0},
		{"BlockSource", plain, &plain.calls, 4},
	} {
		p, err := New(Config{Logger: discardLogger(), BlockLists: []BlockList{{Name: "big", Source: tc.src}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		tc.calls.Store(0)
		for addr, want := range map[string]Status{"192.0.2.1": Allowed, "203.0.113.9": Blocked, "100.0.1.6": Blocked, "100.0.1.7": Allowed} {
			if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr(addr)); d.Status != want {
				t.Errorf("%s: VerifyAddr(%s) = %v, want %v", tc.name, addr, d.Status, want)
			}
		}
		if got := tc.calls.Load(); got != tc.wantCalls {
			t.Errorf("%s: calls of BlockSet over 4 VerifyAddr = %d, want %d", tc.name, got, tc.wantCalls)
		}
	}
	// A set stored later is in force from the next request.
	handing.set.Store(NewBlockSet([]BlockEntry{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}}))
	p, err := New(Config{Logger: discardLogger(), BlockLists: []BlockList{{Name: "big", Source: handing}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	handing.set.Store(NewBlockSet(entries))
	if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1")); d.Status != Allowed {
		t.Errorf("VerifyAddr(192.0.2.1) after the source stored a set without it = %v, want allowed", d.Status)
	}
	if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("203.0.113.1")); d.Status != Blocked {
		t.Errorf("VerifyAddr(203.0.113.1) after the source stored a set with it = %v, want blocked", d.Status)
	}
}

// bigSet is the size past which a BlockSet indexes the /24s of IPv4
// (blocklist's v4OccupancyMin): the sets of these tests take that path.
const bigSet = 1 << 17

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
			cfg := Config{Logger: slog.New(rec), BlockLists: []BlockList{
				{Name: "list", URL: srv.URL + "/list.txt", Cache: cache, MinShare: tt.minShare}}}
			p, err := New(cfg)
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
			wantSt := BlockListStats{Name: "list", Entries: tt.entries, Up: true}
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
			p, err = New(cfg)
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
			p, err := New(Config{Logger: slog.New(slog.DiscardHandler),
				BlockLists: []BlockList{{Name: "list", Path: path, MinShare: minShare}}})
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
		var entries []BlockEntry
		for _, s := range tt.entries {
			entries = append(entries, BlockEntry{Prefix: netip.MustParsePrefix(s)})
		}
		err := NewBlockSet(entries).CheckCoverage()
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
		p, err := New(Config{Logger: slog.New(rec),
			BlockLists: []BlockList{{Name: "mine", Path: path, MinShare: -1}}})
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
		for addr, st := range map[string]Status{"192.0.2.7": Blocked, "192.0.2.8": Allowed, "2001:db8::1": Allowed} {
			if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr(addr)); d.Status != st {
				t.Errorf("VerifyAddr(%s) after a too-wide rewrite = %v, want %v", addr, d.Status, st)
			}
		}
		if logged := notLoaded(rec); len(logged) != 1 || logged[0]["list"] != "mine" || logged[0]["err"] != want || logged[0]["level"] != "WARN" {
			t.Errorf("refusals logged = %v, want one WARN naming mine", logged)
		}
	}
}

// listMemoryBound is the peak heap, above what was in use before, that
// loading a generated list of 4M IPv4 addresses (56 MiB) from a URL may
// reach; docs/blocklists.md states it.
const listMemoryBound = 768 << 20

// A large URL list is parsed as it comes, never held whole: the peak
// heap of its load, sampled every millisecond, stays under
// listMemoryBound.
func TestBlockListLoadMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("loads 56 MiB; its heap is measured without -short and -race")
	}
	const n = 4 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bw := bufio.NewWriter(w)
		for i := range n {
			x := uint32(i)*2654435761 | 1<<24 // spread over 1.0.0.0 and up
			fmt.Fprintf(bw, "%d.%d.%d.%d\n", 1+x>>24%223, x>>16&255, x>>8&255, x&255)
		}
		bw.Flush()
	}))
	t.Cleanup(srv.Close)
	var p *Protector
	var err error
	got := heaptest.PeakInuse(func() {
		p, err = New(Config{Logger: slog.New(slog.DiscardHandler),
			BlockLists: []BlockList{{Name: "big", URL: srv.URL, Cache: t.TempDir() + "/big.cache"}}})
		if err != nil {
			return
		}
		t.Cleanup(func() { p.Close() })
		err = p.ReloadBlockLists(t.Context())
	})
	if err != nil {
		t.Fatal(err)
	}
	entries := p.Stats().BlockLists[0].Entries
	t.Logf("peak heap above the start: %d MiB for %d entries", got>>20, entries)
	if entries < n*9/10 {
		t.Errorf("entries = %d, want about %d", entries, n)
	}
	if got > listMemoryBound {
		t.Errorf("peak heap loading %d addresses = %d MiB, want at most %d MiB", n, got>>20, listMemoryBound>>20)
	}
}

// loads is a slog.Handler that passes on the name of each list loaded.
type loads chan string

func (l loads) Enabled(context.Context, slog.Level) bool { return true }
func (l loads) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l loads) WithGroup(string) slog.Handler            { return l }
func (l loads) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "protect: block list loaded" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "list" {
				select {
				case l <- a.Value.String():
				default:
				}
			}
			return true
		})
	}
	return nil
}

// waitLoad waits for a load of list, or fails after 10s.
func waitLoad(t *testing.T, l loads, list string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-l:
			if got == list {
				return
			}
		case <-timeout:
			t.Fatalf("no load of %s within 10s", list)
		}
	}
}

// ReloadBlockLists checks the lists side by side: while one list's
// server trickles its answer, the other list is fetched and in force.
// Calls made while a list's check runs share one more check of it: six
// calls during a slow fetch cost that list exactly one more GET.
func TestReloadBlockListsSideBySide(t *testing.T) {
	slow, fast := blocktest.NewServer(t, "192.0.2.1\n"), blocktest.NewServer(t, "198.51.100.1\n")
	l := make(loads, 64)
	p, err := New(Config{Logger: slog.New(l), BlockLists: []BlockList{
		{Name: "slow", URL: slow.URL + "/a.txt", MinShare: -1},
		{Name: "fast", URL: fast.URL + "/b.txt", MinShare: -1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.ReloadBlockLists(t.Context()); err != nil {
		t.Fatal(err)
	}
	blocked := func(addr string) bool {
		d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr(addr))
		return d.Status == Blocked
	}
	slowGets := slow.Gets.Load()

	slow.Slow.Store(true)
	slow.SetBody("192.0.2.2\n")
	fast.SetBody("203.0.113.9\n")
	for len(l) > 0 {
		<-l
	}
	first := make(chan error, 1)
	go func() { first <- p.ReloadBlockLists(context.Background()) }()
	<-slow.Started
	waitLoad(t, l, "fast")
	if !blocked("203.0.113.9") || blocked("198.51.100.1") {
		t.Errorf("while the slow list trickles: 203.0.113.9 blocked %v, 198.51.100.1 blocked %v; want the fast list's new set", blocked("203.0.113.9"), blocked("198.51.100.1"))
	}
	select {
	case err := <-first:
		t.Fatalf("ReloadBlockLists returned %v while a list's server still trickles, want it to wait for the list", err)
	default:
	}

	// Five calls that give up at once share one more check of the slow
	// list, run after the slow one.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for range 5 {
		if err := p.ReloadBlockLists(gone); err == nil || !strings.Contains(err.Error(), `protect: block list "slow": context canceled`) {
			t.Errorf("ReloadBlockLists(a canceled context) = %v, want the slow list's context canceled", err)
		}
	}
	slow.Slow.Store(false)
	slow.Release()
	if err := <-first; err != nil {
		t.Errorf("the first ReloadBlockLists = %v, want nil", err)
	}
	waitLoad(t, l, "slow")
	waitLoad(t, l, "slow")
	if err := p.ReloadBlockLists(t.Context()); err != nil { // one more, after the shared one
		t.Fatal(err)
	}
	if got := slow.Gets.Load() - slowGets; got != 3 {
		t.Errorf("GETs of the slow list for 7 calls, 5 of them during its slow fetch = %d, want 3", got)
	}
	if !blocked("192.0.2.2") {
		t.Errorf("192.0.2.2 after the slow fetch ended: not blocked, want blocked")
	}
}

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
	p, err := New(Config{
		Store: s, Logger: slog.New(slog.DiscardHandler), MaxRequests: 5,
		SafeNetworks: []string{"198.51.100.128/25"},
		BlockLists: []BlockList{
			{Name: "mine", Path: mine},
			{Name: "drop", Path: drop, Format: FormatSpamhaus},
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
			if err != nil || d.Status != Blocked || d.StatusCode() != 403 || d.Ban == nil {
				t.Fatalf("VerifyAddr(%s) = %v %d, %v; want blocked 403", tt.addr, d.Status, d.StatusCode(), err)
			}
			if d.Ban.By != tt.list || d.Ban.Key.String() != strings.TrimSuffix(tt.entry, "/32") || d.Ban.Reason != tt.note || d.Ban.Source != SourceList {
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
	if st := p.Stats(); st.StoreCalls != 0 || st.Decisions[Blocked] != 16 {
		t.Errorf("Stats() = %d store calls, %d blocked; want 0, 16", st.StoreCalls, st.Decisions[Blocked])
	}

	if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("198.51.100.200")); d.Status != Safe {
		t.Errorf("VerifyAddr(198.51.100.200) = %v, want safe: a safe network wins over a list", d.Status)
	}
	for i := range int64(2) {
		d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("203.0.113.9"))
		if d.Status != Allowed || d.Count != i+1 {
			t.Errorf("VerifyAddr(203.0.113.9) #%d = %v count %d, want allowed %d", i+1, d.Status, d.Count, i+1)
		}
	}
	if st := p.Stats(); st.StoreCalls != 2 {
		t.Errorf("Stats().StoreCalls = %d, want 2", st.StoreCalls)
	}

	matches := p.BlockListMatches(netip.MustParseAddr("198.51.100.7"))
	want := []ListMatch{{List: "mine", Source: mine, Entry: netip.MustParsePrefix("198.51.100.0/24")}}
	if len(matches) != 1 || matches[0] != want[0] {
		t.Errorf("BlockListMatches(198.51.100.7) = %+v, want %+v", matches, want)
	}
	if got := p.BlockListMatches(netip.MustParseAddr("203.0.113.9")); got != nil {
		t.Errorf("BlockListMatches(203.0.113.9) = %+v, want nil", got)
	}
	// Lists are not bans: the store's ban list holds none of them, and
	// a lift lifts nothing.
	bans, err := p.bans(t.Context(), BanFilter{})
	if err != nil || len(bans) != 0 {
		t.Errorf("Bans() = %v, %v; want none", bans, err)
	}
	if lifted, err := p.Lift(t.Context(), "192.0.2.7", "test"); err != nil || len(lifted) != 0 {
		t.Errorf("Lift(192.0.2.7) = %v, %v; want nothing lifted", lifted, err)
	}
	if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.7")); d.Status != Blocked {
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
	p, err := New(Config{Logger: slog.New(rec), Clock: clock.Now,
		BlockLists: []BlockList{{Name: "list", Path: path}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	status := func(addr string) Status {
		d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr(addr))
		return d.Status
	}
	stats := func() BlockListStats {
		t.Helper()
		st := p.Stats().BlockLists
		if len(st) != 1 {
			t.Fatalf("Stats().BlockLists = %v, want one", st)
		}
		return st[0]
	}
	if status("192.0.2.7") != Blocked || status("192.0.2.8") != Allowed {
		t.Fatalf("before the rewrite: 192.0.2.7 %v, 192.0.2.8 %v; want blocked, allowed", status("192.0.2.7"), status("192.0.2.8"))
	}

	writeList(t, path, "192.0.2.8\n")
	clock.Advance(10 * time.Second)
	if err := p.ReloadBlockLists(t.Context()); err != nil {
		t.Fatal(err)
	}
	if status("192.0.2.7") != Allowed || status("192.0.2.8") != Blocked {
		t.Errorf("after the rewrite: 192.0.2.7 %v, 192.0.2.8 %v; want allowed, blocked", status("192.0.2.7"), status("192.0.2.8"))
	}
	if st := stats(); st != (BlockListStats{Name: "list", Entries: 1, Up: true, Age: 0}) {
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
	if status("192.0.2.8") != Blocked || status("192.0.2.9") != Allowed {
		t.Errorf("after a broken rewrite: 192.0.2.8 %v, 192.0.2.9 %v; want the last good set", status("192.0.2.8"), status("192.0.2.9"))
	}
	if st := stats(); st != (BlockListStats{Name: "list", Entries: 1, Errors: 1, Up: false, Age: 20 * time.Second}) {
		t.Errorf("Stats().BlockLists[0] = %+v, want 1 entry, 1 error, down, age 20s", st)
	}
	if n := rec.Count("protect: block list not loaded; the last good set stays in force"); n != 1 {
		t.Errorf("the failed load was logged %d times, want 1", n)
	}

	writeList(t, path, "192.0.2.9\nnot-an-address\n")
	if err := p.ReloadBlockLists(t.Context()); err != nil {
		t.Fatal(err)
	}
	if status("192.0.2.9") != Blocked {
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
	list := BlockList{Name: "drop", URL: srv.URL + "/drop.txt", Format: FormatSpamhaus, Cache: cache}
	cfg := Config{Logger: slog.New(slog.DiscardHandler), BlockLists: []BlockList{list}}
	p, err := New(cfg)
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
	if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("203.0.113.5")); d.Status != Blocked {
		t.Errorf("VerifyAddr(203.0.113.5) with the server failing = %v, want blocked by the last good set", d.Status)
	}
	if st := p.Stats().BlockLists[0]; st.Up || st.Errors != 1 || st.Entries != 1 {
		t.Errorf("Stats().BlockLists[0] = %+v, want down, 1 error, 1 entry", st)
	}
	p.Close()
	srv.Close()

	p, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("203.0.113.5"))
	if d.Status != Blocked || d.Ban.Reason != "SBL1" {
		t.Errorf("VerifyAddr(203.0.113.5) from the cached copy = %v, want blocked by SBL1", d.Status)
	}
}

func TestBlockListConfigErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.txt")
	tests := []struct {
		list BlockList
		want string
	}{
		{BlockList{Path: "x"}, `BlockLists[0] "": Name`},
		{BlockList{Name: "a"}, "give exactly one of Path, URL and Source"},
		{BlockList{Name: "a", Path: "x", URL: "http://x"}, "give exactly one of Path, URL and Source"},
		{BlockList{Name: "a", URL: "ftp://x"}, `URL "ftp://x": want http:// or https://`},
		{BlockList{Name: "a", Path: missing}, "missing.txt"},
		{BlockList{Name: "a", Path: missing, Refresh: time.Millisecond}, "Refresh 1ms: want at least 1s"},
		{BlockList{Name: "a", Path: missing, Cache: "c"}, "Cache: only a URL list"},
	}
	for _, tt := range tests {
		_, err := New(Config{Logger: slog.New(slog.DiscardHandler), BlockLists: []BlockList{tt.list}})
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
	p, err := New(Config{Logger: slog.New(slog.DiscardHandler),
		BlockLists: []BlockList{{Name: "list", Path: path, Refresh: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	writeList(t, path, "192.0.2.8\n")
	deadline := time.Now().Add(3 * time.Second)
	for {
		d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.8"))
		if d.Status == Blocked {
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
	p, err := New(Config{Logger: slog.New(rec), DryRun: true, Namespace: "dry:",
		BlockLists: []BlockList{{Name: "list", Path: path}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.7"))
	if d.Status != Blocked || d.Refused() || d.StatusCode() != 200 {
		t.Errorf("VerifyAddr(192.0.2.7) in a dry run = %v, refused %v, %d; want blocked, served, 200", d.Status, d.Refused(), d.StatusCode())
	}
	if n := rec.Count("protect: dry run: would refuse"); n != 1 {
		t.Errorf("%d would-refuse lines, want 1", n)
	}
	if st := p.Stats(); st.DryRunRefusals != 1 || st.Decisions[Blocked] != 1 {
		t.Errorf("Stats() = %d dry-run refusals, %d blocked; want 1, 1", st.DryRunRefusals, st.Decisions[Blocked])
	}
}
