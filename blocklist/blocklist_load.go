package blocklist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// maxListBody bounds what a list's URL may send: IPsum, the largest
// common list, is a few megabytes.
const maxListBody = 64 << 20

// maxLoggedLines bounds the bad lines a load logs one by one; the rest are
// counted in one more line.
const maxLoggedLines = 10

// listUserAgent is sent with every fetch, so that a list's server can
// tell who asks (Spamhaus and FireHOL ask that fetchers say who they are).
const listUserAgent = "protect-blocklist/1 (+https://github.com/httpprotect/protect)"

// listTimeout bounds one check of a list: the fetch of its URL, its
// body read and parsed as it comes, and its copy written. A server that
// trickles its answer is cut there, and the list keeps its last good set.
const listTimeout = 30 * time.Second

// defaultMinShare is List.MinShare's zero value: a load must keep
// at least half of the entries in force.
const defaultMinShare = 0.5

// A listSource is a List read from a Path or a URL.
type listSource struct {
	cfg     List
	clock   func() time.Time
	log     *slog.Logger
	client  *http.Client
	life    context.Context // ends at Close: every check runs under it
	timeout time.Duration   // bounds one check [listTimeout]
	wg      *sync.WaitGroup // counts the goroutines that run checks

	set     atomic.Pointer[Set]
	errors  atomic.Uint64
	up      atomic.Bool
	checked atomic.Int64 // the clock's Unix nanoseconds; 0 before any

	runMu  sync.Mutex // guards cur, next, closed
	cur    *checkRun  // the check running; nil when none
	next   *checkRun  // the one more check asked for while cur runs; nil when none
	closed bool

	mu sync.Mutex // one check at a time; guards what follows
	// What the last read saw, loaded or refused: an unchanged source is
	// not read again, so a refused load is counted and logged once.
	mod     time.Time
	size    int64
	seen    bool
	etag    string
	lastMod string
	lastErr string // the failure last logged; "" after a success
	polling bool   // start has returned: a failure before it is New's error, not logged
}

// A checkRun is one check of a list, shared by every caller that asked
// for it: callers that ask while a check runs share the one more check
// that runs after it, so that a burst of reloads costs two checks.
type checkRun struct {
	done chan struct{} // closed when err is set
	err  error
}

var errListClosed = errors.New("protect: block lists closed")

func newListSource(c List, clock func() time.Time, log *slog.Logger, life context.Context, wg *sync.WaitGroup) *listSource {
	return &listSource{cfg: c, clock: clock, log: log, client: &http.Client{}, life: life, timeout: listTimeout, wg: wg}
}

// Set implements Source.
func (s *listSource) BlockSet() *Set { return s.set.Load() }

// Status implements Statuser.
func (s *listSource) BlockSourceStatus() Status {
	st := Status{Up: s.up.Load(), Errors: s.errors.Load()}
	if c := s.checked.Load(); c != 0 {
		st.Checked = time.Unix(0, c)
	}
	return st
}

// start loads what New must have: the file, or the cached copy of a URL.
func (s *listSource) start() error {
	// A failure until start returns is New's error, not logged; every
	// check after it, the first fetch of a URL too, logs its failure.
	defer func() {
		s.mu.Lock()
		s.polling = true
		s.mu.Unlock()
	}()
	if s.cfg.Path != "" {
		if err := s.checkNow(); err != nil && s.set.Load() == nil {
			return err
		}
		return nil
	}
	if s.cfg.Cache != "" {
		s.loadCache()
	}
	return nil
}

// poll checks the source every Refresh until ctx ends.
func (s *listSource) poll(ctx context.Context) {
	t := time.NewTicker(s.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.check(ctx)
		}
	}
}

// check asks for a check of the source and waits for it, or for ctx.
func (s *listSource) check(ctx context.Context) error {
	r := s.request()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("protect: block list %q: %w", s.cfg.Name, ctx.Err())
	}
}

// request returns the check that answers a caller asking now: a new one
// when none runs, else the one more that runs after the running one.
func (s *listSource) request() *checkRun {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.closed {
		r := &checkRun{done: make(chan struct{}), err: errListClosed}
		close(r.done)
		return r
	}
	if s.cur != nil {
		if s.next == nil {
			s.next = &checkRun{done: make(chan struct{})}
		}
		return s.next
	}
	s.cur = &checkRun{done: make(chan struct{})}
	s.wg.Add(1)
	go s.run(s.cur)
	return s.cur
}

// run runs r, then the check asked for meanwhile, if any.
func (s *listSource) run(r *checkRun) {
	defer s.wg.Done()
	for r != nil {
		r.err = s.checkNow()
		close(r.done)
		s.runMu.Lock()
		s.cur, s.next = s.next, nil
		r = s.cur
		s.runMu.Unlock()
	}
}

// close refuses further checks; the pollers' WaitGroup waits for those
// running.
func (s *listSource) close() {
	s.runMu.Lock()
	s.closed = true
	s.runMu.Unlock()
}

// checkNow reads the source again if it changed, within s.timeout.
func (s *listSource) checkNow() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Path != "" {
		return s.checkFile()
	}
	ctx, cancel := context.WithTimeout(s.life, s.timeout)
	defer cancel()
	return s.checkURL(ctx)
}

func (s *listSource) checkFile() error {
	fi, err := os.Stat(s.cfg.Path)
	if err != nil {
		return s.failed(err)
	}
	if s.seen && fi.ModTime().Equal(s.mod) && fi.Size() == s.size {
		if s.up.Load() {
			s.confirmed()
		}
		return nil
	}
	f, err := os.Open(s.cfg.Path)
	if err != nil {
		return s.failed(err) // tried again at the next check: a file being replaced, a permission put right
	}
	defer f.Close()
	s.mod, s.size, s.seen = fi.ModTime(), fi.Size(), true
	_, err = s.load(f)
	return err
}

func (s *listSource) checkURL(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return s.failed(err)
	}
	req.Header.Set("User-Agent", listUserAgent)
	if s.set.Load() != nil { // validators only for the copy in force
		if s.etag != "" {
			req.Header.Set("If-None-Match", s.etag)
		}
		if s.lastMod != "" {
			req.Header.Set("If-Modified-Since", s.lastMod)
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text quotes the URL whole
		}
		return s.failed(fmt.Errorf("GET %s: %w", shownURL(s.cfg.URL), err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotModified && s.set.Load() != nil:
		s.up.Store(true)
		s.lastErr = ""
		s.confirmed()
		return nil
	case resp.StatusCode != http.StatusOK:
		return s.failed(fmt.Errorf("GET %s: %s", shownURL(s.cfg.URL), resp.Status))
	}
	// The body is parsed as it comes, and copied as it comes into a
	// temporary file beside Cache, which replaces the copy only when the
	// load is taken: nothing holds the whole body.
	var body io.Reader = &boundedReader{r: resp.Body, left: maxListBody, url: shownURL(s.cfg.URL)}
	var tmp *os.File
	if s.cfg.Cache != "" {
		tmp, err = os.CreateTemp(filepath.Dir(s.cfg.Cache), filepath.Base(s.cfg.Cache)+".tmp*")
		if err != nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "protect: block list: cannot keep a copy", slog.String("list", s.cfg.Name), slog.String("cache", s.cfg.Cache), slog.String("err", err.Error()))
		} else {
			defer func() {
				if tmp != nil {
					tmp.Close()
					os.Remove(tmp.Name())
				}
			}()
			body = io.TeeReader(body, tmp)
		}
	}
	ok, err := s.load(body)
	if !ok {
		return err
	}
	s.etag, s.lastMod = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	if tmp != nil {
		err := s.saveCache(tmp)
		tmp = nil
		if err != nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "protect: block list: cannot keep a copy", slog.String("list", s.cfg.Name), slog.String("cache", s.cfg.Cache), slog.String("err", err.Error()))
		}
	}
	return nil
}

// A boundedReader reads at most left bytes of r, and fails the read
// that would go past them.
type boundedReader struct {
	r    io.Reader
	left int64
	url  string
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, fmt.Errorf("GET %s: longer than %d bytes", b.url, maxListBody)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, fmt.Errorf("GET %s: longer than %d bytes", b.url, maxListBody)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("GET %s: %w", b.url, err)
	}
	return n, err
}

// cacheMeta is what Cache+".meta" holds.
type cacheMeta struct {
	URL          string `json:"url"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
}

func (s *listSource) loadCache() {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, err := os.Open(s.cfg.Cache)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("protect: block list: cannot read its copy", "list", s.cfg.Name, "cache", s.cfg.Cache, "err", err.Error())
		}
		return
	}
	var meta cacheMeta
	if b, err := os.ReadFile(s.cfg.Cache + ".meta"); err == nil {
		json.Unmarshal(b, &meta)
	}
	ok, _ := s.load(body)
	body.Close()
	if ok && meta.URL == s.cfg.URL {
		s.etag, s.lastMod = meta.ETag, meta.LastModified
	}
	// The copy is as old as it is, and no check has been made: the
	// first fetch confirms it.
	s.checked.Store(0)
	s.up.Store(false)
}

// saveCache puts tmp, the copy just written, in Cache's place, then its
// validators, each by a rename, so that a crash leaves the old copy or
// the new one. tmp is closed, and removed if it is not renamed.
func (s *listSource) saveCache(tmp *os.File) error {
	err := tmp.Sync()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.cfg.Cache)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	meta, _ := json.Marshal(cacheMeta{URL: s.cfg.URL, ETag: s.etag, LastModified: s.lastMod})
	return writeFileAtomic(s.cfg.Cache+".meta", meta)
}

func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// load parses r and puts its set in force, unless it is refused: when it
// cannot be read, when its bad lines outnumber its good ones, when it
// covers too much of an address family (Set.CheckCoverage), or when
// it holds fewer than MinShare of the entries in force.
func (s *listSource) load(r io.Reader) (bool, error) {
	parsed, err := parseList(r, s.cfg.Format, s.cfg.MinCount)
	if err != nil {
		return false, s.failed(err)
	}
	good := len(parsed.prefixes) + parsed.skipped
	if n := len(parsed.bad); n > 0 && n > good {
		return false, s.failed(fmt.Errorf("%d of %d lines bad, first %w", n, n+good, &parsed.bad[0]))
	}
	set := newBlockSet(&parsed)
	parsed.prefixes, parsed.notes = nil, nil
	if err := set.CheckCoverage(); err != nil {
		return false, s.failed(err)
	}
	if old := s.set.Load().Len(); s.cfg.MinShare >= 0 && old > 0 {
		share := s.cfg.MinShare
		if share == 0 {
			share = defaultMinShare
		}
		if float64(set.Len()) < share*float64(old) {
			return false, s.failed(fmt.Errorf("%d entries, fewer than %g of the %d in force (MinShare)", set.Len(), share, old))
		}
	}
	s.set.Store(set)
	s.up.Store(true)
	s.lastErr = ""
	s.confirmed()
	ctx := context.Background()
	for i, b := range parsed.bad {
		if i == maxLoggedLines {
			s.log.LogAttrs(ctx, slog.LevelWarn, "protect: block list: more bad lines skipped", slog.String("list", s.cfg.Name), slog.Int("more", len(parsed.bad)-i))
			break
		}
		s.log.LogAttrs(ctx, slog.LevelWarn, "protect: block list: bad line skipped", slog.String("list", s.cfg.Name),
			slog.Int("line", b.Line), slog.String("text", b.Text), slog.String("err", b.Err.Error()))
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "protect: block list loaded", slog.String("list", s.cfg.Name),
		slog.String("source", s.cfg.Path+shownURL(s.cfg.URL)), slog.Int("entries", set.Len()), slog.Int("bad_lines", len(parsed.bad)))
	return true, nil
}

func (s *listSource) confirmed() { s.checked.Store(s.clock().UnixNano()) }

// failed counts a failed check, logs it unless it is the one last
// logged, and returns it, naming the list. The set in force stays.
func (s *listSource) failed(err error) error {
	err = fmt.Errorf("protect: block list %q (%s): %w", s.cfg.Name, s.cfg.Path+shownURL(s.cfg.URL), err)
	s.errors.Add(1)
	s.up.Store(false)
	set := s.set.Load()
	if set == nil && !s.polling {
		return err // New returns it: nothing is in force, and nothing starts
	}
	if msg := err.Error(); msg != s.lastErr {
		s.lastErr = msg
		what := "protect: block list not loaded; the last good set stays in force"
		if set == nil {
			what = "protect: block list not loaded; it blocks nothing until it loads"
		}
		s.log.LogAttrs(context.Background(), slog.LevelWarn, what,
			slog.String("list", s.cfg.Name), slog.Int("entries", set.Len()), slog.String("err", msg))
	}
	return err
}

// shownURL is a list's URL as logs, errors and metrics show it: without
// its password and its query, either of which may hold a secret (a
// token in ?key=). "" stays "".
func shownURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)"
	}
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	u.Fragment, u.RawFragment = "", ""
	return u.Redacted()
}
