package protect

import (
	"bytes"
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

// A listSource is a BlockList read from a Path or a URL.
type listSource struct {
	cfg    BlockList
	clock  func() time.Time
	log    *slog.Logger
	client *http.Client

	set     atomic.Pointer[BlockSet]
	errors  atomic.Uint64
	up      atomic.Bool
	checked atomic.Int64 // the clock's Unix nanoseconds; 0 before any

	mu sync.Mutex // one check at a time; guards what follows
	// What the last read saw, loaded or refused: an unchanged source is
	// not read again, so a refused load is counted and logged once.
	mod     time.Time
	size    int64
	seen    bool
	etag    string
	lastMod string
	lastErr string // the failure last logged; "" after a success
	polling bool   // poll has begun: a failure before it is New's error, not logged
}

func newListSource(c BlockList, clock func() time.Time, log *slog.Logger) *listSource {
	return &listSource{cfg: c, clock: clock, log: log, client: &http.Client{Timeout: 30 * time.Second}}
}

// BlockSet implements BlockSource.
func (s *listSource) BlockSet() *BlockSet { return s.set.Load() }

// BlockSourceStatus implements BlockSourceStatuser.
func (s *listSource) BlockSourceStatus() BlockSourceStatus {
	st := BlockSourceStatus{Up: s.up.Load(), Errors: s.errors.Load()}
	if c := s.checked.Load(); c != 0 {
		st.Checked = time.Unix(0, c)
	}
	return st
}

// start loads what New must have: the file, or the cached copy of a URL.
func (s *listSource) start() error {
	if s.cfg.Path != "" {
		if err := s.check(context.Background()); err != nil && s.set.Load() == nil {
			return err
		}
		return nil
	}
	if s.cfg.Cache != "" {
		s.loadCache()
	}
	return nil
}

// poll checks the source every Refresh until ctx ends; a URL is fetched
// at once, since New only read its cache.
func (s *listSource) poll(ctx context.Context) {
	s.mu.Lock()
	s.polling = true
	s.mu.Unlock()
	if s.cfg.URL != "" {
		s.check(ctx)
	}
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

// check reads the source again if it changed.
func (s *listSource) check(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Path != "" {
		return s.checkFile()
	}
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
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxListBody+1))
	if err != nil {
		return s.failed(fmt.Errorf("GET %s: %w", shownURL(s.cfg.URL), err))
	}
	if len(body) > maxListBody {
		return s.failed(fmt.Errorf("GET %s: longer than %d bytes", shownURL(s.cfg.URL), maxListBody))
	}
	ok, err := s.load(bytes.NewReader(body))
	if !ok {
		return err
	}
	s.etag, s.lastMod = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	if s.cfg.Cache != "" {
		if err := s.saveCache(body); err != nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "protect: block list: cannot keep a copy", slog.String("list", s.cfg.Name), slog.String("cache", s.cfg.Cache), slog.String("err", err.Error()))
		}
	}
	return nil
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
	body, err := os.ReadFile(s.cfg.Cache)
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
	if ok, _ := s.load(bytes.NewReader(body)); ok && meta.URL == s.cfg.URL {
		s.etag, s.lastMod = meta.ETag, meta.LastModified
	}
	// The copy is as old as it is, and no check has been made: the
	// first fetch confirms it.
	s.checked.Store(0)
	s.up.Store(false)
}

// saveCache writes the copy, then its validators, each by a rename, so
// that a crash leaves the old copy or the new one.
func (s *listSource) saveCache(body []byte) error {
	meta, _ := json.Marshal(cacheMeta{URL: s.cfg.URL, ETag: s.etag, LastModified: s.lastMod})
	if err := writeFileAtomic(s.cfg.Cache, body); err != nil {
		return err
	}
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
// cannot be read, or when its bad lines outnumber its good ones.
func (s *listSource) load(r io.Reader) (bool, error) {
	parsed, err := parseList(r, s.cfg.Format, s.cfg.MinCount)
	if err != nil {
		return false, s.failed(err)
	}
	good := len(parsed.entries) + parsed.skipped
	if n := len(parsed.bad); n > 0 && n > good {
		return false, s.failed(fmt.Errorf("%d of %d lines bad, first %w", n, n+good, &parsed.bad[0]))
	}
	set := NewBlockSet(parsed.entries)
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
