package blocklist

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A List is a list of addresses and networks that the protector
// refuses as Blocked (403, code blocked) before it counts anything or
// touches the store: Spamhaus DROP, FireHOL level 1, IPsum, your own
// list, or a live source such as CrowdSec's decisions (package crowdsec).
// SafeNetworks still win over every list. A list is not a ban: nothing
// of it is written to the store, listed as a ban, or lifted; it changes
// when its source changes. Give exactly one of Path, URL and Source.
// The zero List is not valid: it has no Name and no source.
//
//	protect.List{Name: "spamhaus-drop", Path: "/etc/protect/drop.txt", Format: protect.FormatSpamhaus}
//	protect.List{Name: "firehol1", URL: "https://iplists.firehol.org/files/firehol_level1.netset",
//		Format: protect.FormatNetset, Refresh: time.Hour, Cache: "/var/lib/protect/firehol1.cache"}
//
// Each load is parsed off the request path and swapped in whole, so a
// request sees the old set or the new one, never half of each. A bad line
// is skipped and logged with its number; a load whose bad lines outnumber
// its good ones, that holds fewer than MinShare of the entries in force,
// whose entries together cover half an address family or more
// (Set.CheckCoverage), or that cannot be read at all, is refused as
// a whole and the last good set stays in force (a truncated download, an
// empty answer or an HTML error page must not empty a list). Stats.BlockLists reports each list's
// entries, failures and the age of the set in force.
type List struct {
	// Name names the list in decisions (Decision.Ban.By), in
	// BlockListMatches, in logs and in metrics (label list). Required,
	// unique among a protector's lists, at most 64 printable bytes.
	Name string
	// Path is a file to read the list from. It is read by New (a file
	// that cannot be read fails New), then checked every Refresh and
	// read again when its modification time or size changed.
	Path string
	// URL is an http or https address to fetch the list from, at New's
	// return and then every Refresh, with a conditional GET
	// (If-None-Match, If-Modified-Since): an unchanged list costs its
	// server a 304. A URL that cannot be fetched at start leaves the list
	// empty (or as Cache last kept it) until it can.
	URL string
	// Source is a live source of entries, kept by code of yours or by
	// package crowdsec. It is asked for its set on every request that
	// reaches this step; Format, MinCount, Refresh and Cache do not apply.
	Source Source
	// Format is the format of Path's or URL's content [FormatPlain].
	Format Format
	// MinCount is, for FormatIPsum, how many lists must name an address
	// for it to be blocked [1: every address of the file]. IPsum's author
	// suggests 3 or more to keep false positives rare.
	MinCount int
	// Refresh is how often the source is checked [10s for a Path: a stat
	// of the file; 1h for a URL, as Spamhaus and FireHOL ask]. At least
	// one second.
	Refresh time.Duration
	// MinShare is the least share of the entries in force that a load
	// must hold to replace them [0: one half, defaultMinShare]; at most
	// 1. A load that holds fewer (an empty 200, a file of comments alone,
	// a download cut short at a line's end) is refused as a failed check:
	// the set in force stays, the refusal is logged as a warning and
	// counted in Stats' Errors, and a URL's copy is not written to
	// Cache. A negative MinShare turns the check off, for a list that
	// may shrink to nothing on purpose; a list with no set in force yet
	// takes any load.
	MinShare float64
	// Challenge marks the list's entries to challenge rather than block:
	// a listed client is Challenged (the proof-of-work page of
	// Config.Challenge) instead of Blocked, is counted as any client is,
	// and is served while it holds a valid pass. An address that a
	// blocking list holds too is Blocked, whatever the order of the
	// lists. Under a protector without Config.Challenge the entries are
	// Blocked: the list asks for a proof the protector cannot ask for.
	Challenge bool
	// Cache is, for a URL, a file where the last good copy is kept
	// (beside it, Cache+".meta" holds its validators) [none]. New loads
	// it before anything is fetched, so a restart while the list's server
	// is unreachable still starts with the list.
	Cache string
}

// A Source is a live source of block list entries: a CrowdSec
// bouncer (package crowdsec), or code of yours. Set is called on
// every request that reaches the block list step, from any goroutine,
// so it must be cheap and safe for concurrent use: an atomic load of a
// set the source replaces whole when it changes.
type Source interface {
	// Set returns the entries in force now; nil is none.
	BlockSet() *Set
}

// A SetPointer is a Source that keeps its set in one
// atomic.Pointer, which it hands over once: requests then load the set
// themselves, without calling Set, and an address that no list
// holds costs them a few loads and no call. The source must only ever
// Store into the pointer (never replace the pointer itself); a set it
// stores is in force from the next request.
type SetPointer interface {
	Source
	BlockSetPointer() *atomic.Pointer[Set]
}

// A Statuser is a Source that reports its health, for
// Stats.BlockLists and metrics. A source that does not implement it is
// reported up, with no age.
type Statuser interface {
	BlockSourceStatus() Status
}

// Status is the health of a block list's source. The zero
// value is a source that is down and has never been checked.
type Status struct {
	// Up reports whether the last check of the source succeeded.
	Up bool
	// Errors counts the checks that failed: loads refused, fetches or
	// polls that failed.
	Errors uint64
	// Checked is when the source last confirmed the set in force: a load,
	// an unchanged file, a 304, a poll answered. Zero before any.
	Checked time.Time
}

// Match is one block list's entry that holds an address. The zero
// Match matches nothing.
type Match struct {
	List    string       // the list's Name
	Source  string       // its Path or URL; for a live source, what it says it is (fmt.Stringer) or its Name
	Entry   netip.Prefix // the entry, as the list gave it (the widest of the list that holds the address)
	Note    string       // what the list says of the entry: an SBL reference, a CrowdSec scenario
	Expires time.Time    // when the entry leaves the list, if the list says; else zero
	// Challenge: the list is marked to challenge (List.Challenge), not
	// to block.
	Challenge bool
}

// Stats is one list's state, in Stats.BlockLists. The zero value
// is an unnamed, empty list that is down.
type Stats struct {
	Name    string
	Entries int    // in the set in force
	Errors  uint64 // failed checks of the source since New
	Up      bool   // the last check succeeded
	// Age is how long ago the source last confirmed the set in force
	// (see Status.Checked); -1 before it ever did. A list whose
	// age grows past a few Refresh intervals is stale: its source cannot
	// be read, and the set in force is the last good one.
	Age time.Duration
}

// Block list defaults.
const (
	DefaultFileRefresh = 10 * time.Second
	DefaultURLRefresh  = time.Hour
)

// Lists are a protector's block lists, running: the sets in force, the
// pollers that keep files and URLs fresh. The first list that holds an
// address decides. A nil *Lists holds no list and blocks nothing.
type Lists struct {
	lists  []*activeList
	clock  func() time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type activeList struct {
	name, source string
	challenge    bool // List.Challenge
	src          Source
	own          *listSource          // nil for a live source
	set          *atomic.Pointer[Set] // the set in force, when the list hands it over; else nil
}

// Open checks the lists, loads the files and caches, and starts the
// pollers, which run until Close; clock tells the time (nil: time.Now),
// log receives what the pollers report (nil: slog.Default()). It returns
// nil when cfg is empty. An error names the list by its index in cfg
// ("[2] "drop": ...") and quotes what is wrong.
func Open(cfg []List, clock func() time.Time, log *slog.Logger) (*Lists, error) {
	if len(cfg) == 0 {
		return nil, nil
	}
	if clock == nil {
		clock = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	bl := &Lists{clock: clock, cancel: cancel}
	ok := false
	defer func() {
		if !ok {
			bl.Close()
		}
	}()
	seen := map[string]bool{}
	for i, c := range cfg {
		if err := checkBlockList(&c); err != nil {
			return nil, fmt.Errorf("[%d] %q: %w", i, c.Name, err)
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("[%d] %q: the name is given twice", i, c.Name)
		}
		seen[c.Name] = true
		a := &activeList{name: c.Name, challenge: c.Challenge}
		switch {
		case c.Source != nil:
			a.src, a.source = c.Source, c.Name
			if s, ok := c.Source.(fmt.Stringer); ok {
				a.source = s.String()
			}
			if sp, ok := c.Source.(SetPointer); ok {
				a.set = sp.BlockSetPointer()
			}
		default:
			a.own = newListSource(c, clock, log, ctx, &bl.wg)
			a.src, a.source, a.set = a.own, c.Path+shownURL(c.URL), &a.own.set
			if err := a.own.start(); err != nil {
				return nil, fmt.Errorf("[%d] %q: %w", i, c.Name, err)
			}
		}
		bl.lists = append(bl.lists, a)
	}
	ok = true
	for _, a := range bl.lists {
		if a.own == nil {
			continue
		}
		if a.own.cfg.URL != "" {
			a.own.request() // the first fetch, at once and off New's path; a ReloadBlockLists now waits for it and one more
		}
		bl.wg.Add(1)
		go func() {
			defer bl.wg.Done()
			a.own.poll(ctx)
		}()
	}
	return bl, nil
}

func checkBlockList(c *List) error {
	if c.Name == "" || len(c.Name) > 64 || strings.IndexFunc(c.Name, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return errors.New("Name: want 1 to 64 printable bytes, no spaces")
	}
	n := 0
	for _, set := range []bool{c.Path != "", c.URL != "", c.Source != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return errors.New("give exactly one of Path, URL and Source")
	}
	if c.URL != "" && !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://") {
		return fmt.Errorf("URL %q: want http:// or https://", c.URL)
	}
	if c.Format > FormatIPsum {
		return fmt.Errorf("Format %d: want FormatPlain, FormatNetset, FormatSpamhaus or FormatIPsum", c.Format)
	}
	if c.MinCount < 0 {
		return fmt.Errorf("MinCount %d: must not be negative", c.MinCount)
	}
	if c.MinShare > 1 || c.MinShare != c.MinShare {
		return fmt.Errorf("MinShare %v: want at most 1 (negative: no check)", c.MinShare)
	}
	if c.Refresh != 0 && c.Refresh < time.Second {
		return fmt.Errorf("Refresh %v: want at least 1s", c.Refresh)
	}
	if c.Refresh == 0 {
		c.Refresh = DefaultFileRefresh
		if c.URL != "" {
			c.Refresh = DefaultURLRefresh
		}
	}
	if c.Cache != "" && c.URL == "" {
		return errors.New("Cache: only a URL list keeps a copy")
	}
	return nil
}

// Close stops the pollers and waits for them. A nil *Lists has none.
func (bl *Lists) Close() {
	if bl != nil {
		bl.cancel()
		for _, a := range bl.lists {
			if a.own != nil {
				a.own.close()
			}
		}
		bl.wg.Wait()
	}
}

// A Hit is the entry of a list that holds an address, as Find reports it.
// The zero Hit is no entry.
type Hit struct {
	List      string // the list's Name
	Entry     Entry
	Challenge bool // the list is marked to challenge (List.Challenge)
}

// Find reports whether a list holds a (a normalised address: unmapped,
// no zone), as the pipeline asks on every request, and writes the entry
// of the first that does into hit: written only on a hit, which most
// requests are not. A list that blocks wins over one marked Challenge,
// whatever their order: hit is a challenge only when no blocking list
// holds a. Each list's set is read as it is in force.
func (bl *Lists) Find(a netip.Addr, hit *Hit) bool {
	if bl == nil {
		return false
	}
	var x uint32
	is4 := a.Is4()
	if is4 {
		b := a.As4()
		x = binary.BigEndian.Uint32(b[:])
	}
	found := false
	for _, l := range bl.lists {
		var s *Set
		if l.set != nil { // a file, a URL, a SetPointer: the set without an interface call
			s = l.set.Load()
		} else {
			s = l.src.BlockSet()
		}
		if is4 && s.misses4(x) || found && l.challenge {
			continue
		}
		if i, ok := s.find(a); ok {
			*hit = Hit{List: l.name, Entry: s.entry(i), Challenge: l.challenge}
			if !l.challenge {
				return true
			}
			found = true // a blocking list after it may hold a too
		}
	}
	return found
}

// Matches returns, for each list that holds a (a normalised address),
// the entry that does, in Config order; nil when none does. It reads
// the sets in force, as requests do.
func (bl *Lists) Matches(a netip.Addr) []Match {
	if bl == nil {
		return nil
	}
	var out []Match
	for _, l := range bl.lists {
		if e, ok := l.src.BlockSet().Match(a); ok {
			out = append(out, Match{List: l.name, Source: l.source, Entry: e.Prefix, Note: e.Note, Expires: e.Expires, Challenge: l.challenge})
		}
	}
	return out
}

// Entries returns every entry of every list in force, list by list in
// order; nil without lists. It copies the sets: a program that hands the
// lists on calls it, never a request.
func (bl *Lists) Entries() []Match {
	if bl == nil {
		return nil
	}
	var out []Match
	for _, l := range bl.lists {
		for _, e := range l.src.BlockSet().Entries() {
			out = append(out, Match{List: l.name, Source: l.source, Entry: e.Prefix, Note: e.Note, Expires: e.Expires, Challenge: l.challenge})
		}
	}
	return out
}

// Reload checks every list read from a Path or a URL now, as its Refresh
// would: a changed file is read again, a URL fetched with a conditional
// GET. The lists are checked at once, side by side, each within its own
// deadline of 30 seconds (listTimeout): a slow server delays its own list
// alone. A list whose check is running when Reload is called is checked
// once more after it, and every call made meanwhile shares that one more
// check: a burst of calls costs each list two checks at most. It returns
// when each list's check is done, or when ctx ends (the checks go on),
// with the failures joined; each failing list keeps its last good set.
// Live sources are not asked: they keep themselves.
func (bl *Lists) Reload(ctx context.Context) error {
	if bl == nil {
		return nil
	}
	var runs []*checkRun
	var names []string
	for _, l := range bl.lists {
		if l.own != nil {
			runs = append(runs, l.own.request())
			names = append(names, l.name)
		}
	}
	var errs []error
	for i, r := range runs {
		select {
		case <-r.done:
			if r.err != nil {
				errs = append(errs, r.err)
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("protect: block list %q: %w", names[i], ctx.Err()))
		}
	}
	return errors.Join(errs...)
}

// Stats reports each list's state now; nil without lists.
func (bl *Lists) Stats() []Stats {
	if bl == nil {
		return nil
	}
	now := bl.clock()
	out := make([]Stats, 0, len(bl.lists))
	for _, l := range bl.lists {
		st := Status{Up: true}
		if s, ok := l.src.(Statuser); ok {
			st = s.BlockSourceStatus()
		}
		age := time.Duration(-1)
		if !st.Checked.IsZero() {
			age = max(now.Sub(st.Checked), 0)
		}
		out = append(out, Stats{Name: l.name, Entries: l.src.BlockSet().Len(), Errors: st.Errors, Up: st.Up, Age: age})
	}
	return slices.Clip(out)
}
