// Package crowdsec is a CrowdSec bouncer: it polls a CrowdSec Local API
// (LAPI) for its decisions and feeds them to a protector's block list
// step, so that whatever CrowdSec's scenarios, its operators (cscli
// decisions add) and its community blocklist decide is refused as
// Blocked, before the protector counts anything or touches its store.
//
//	b, err := crowdsec.New(crowdsec.Options{URL: "http://127.0.0.1:8080", Key: key})
//	go b.Run(ctx)
//	p, err := protect.New(protect.Config{BlockLists: []protect.BlockList{b.BlockList()}})
//
// The key is a bouncer's, from "cscli bouncers add NAME". The bouncer asks
// GET /v1/decisions/stream?startup=true once, for every decision in
// force, then every Interval for what changed since (new decisions and
// deleted or expired ones). It takes decisions of scope Ip and Range
// whose type is one of Options.Types (ban by default); each ends when the
// LAPI deletes it or its duration runs out, whichever comes first. While
// the LAPI cannot be reached the last set stays in force (a CrowdSec
// restart must not open the door), the change of state is logged once
// each way, and BlockSourceStatus reports it for metrics.
//
// It is a small client of its own, not CrowdSec's Go module, which would
// bring the whole of CrowdSec into every program that imports protect.
package crowdsec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpprotect/protect"
)

// UserAgent is sent with every request, so that the LAPI's log and
// "cscli bouncers list" tell this bouncer apart.
const UserAgent = "protect-crowdsec-bouncer/1"

// DefaultInterval is the poll interval when Options.Interval is zero; a
// new decision is enforced within one interval.
const DefaultInterval = 10 * time.Second

// MinInterval is the shortest Options.Interval.
const MinInterval = time.Second

// Name is the name of the block list a Bouncer feeds (BlockList), in
// decisions (Decision.Ban.By), protectctl check and metrics.
const Name = "crowdsec"

// maxBody bounds one answer of the LAPI: a startup with the community
// blocklist is a few megabytes.
const maxBody = 256 << 20

// Options configure a Bouncer. URL and Key are required; every other
// zero field takes the default in brackets.
type Options struct {
	// URL is the LAPI's base URL, such as http://127.0.0.1:8080.
	URL string
	// Key is the bouncer's API key, from cscli bouncers add. It is sent
	// in X-Api-Key and never logged.
	Key string
	// Interval is how often the LAPI is asked for what changed
	// [DefaultInterval]; at least MinInterval.
	Interval time.Duration
	// Types are the decision types refused [ban]. CrowdSec's other
	// common type, captcha, asks for a challenge protect cannot give:
	// listing it here refuses those clients outright.
	Types []string
	// Client makes the requests [a client with a timeout of Interval,
	// at least 5s].
	Client *http.Client
	// Logger receives the changes of the LAPI's state [slog.Default()].
	Logger *slog.Logger
	// Clock tells the time decisions expire by [time.Now].
	Clock func() time.Time
}

// A Bouncer keeps the decisions of one LAPI. The zero Bouncer is not
// usable: make one with New. It implements
// protect.BlockSource and protect.BlockSourceStatuser; it polls only
// while Run runs (or when Poll is called).
type Bouncer struct {
	opts   Options
	stream *url.URL
	types  map[string]bool

	set     atomic.Pointer[protect.BlockSet]
	up      atomic.Bool
	errors  atomic.Uint64
	checked atomic.Int64 // the clock's Unix nanoseconds of the last answered poll; 0 before

	mu        sync.Mutex // one poll at a time; guards what follows
	decisions map[int64]decision
	started   bool              // the startup poll was answered
	nextEnd   time.Time         // the earliest end of a decision in the set; zero when none
	logged    int               // the state last logged: 0 none, 1 up, -1 down
	changed   bool              // decisions came or went since the set was made
	scenarios map[string]string // one copy of each scenario's name: thousands of decisions share a few
	tooWide   bool              // the last set made was refused (protect.BlockSet.CheckCoverage)
}

// decision is one decision in force.
type decision struct {
	prefix   netip.Prefix
	scenario string
	end      time.Time
}

// New checks opts and returns a Bouncer with no decision yet.
func New(opts Options) (*Bouncer, error) {
	if opts.URL == "" || opts.Key == "" {
		return nil, errors.New("crowdsec: URL and Key are both required")
	}
	u, err := url.Parse(strings.TrimRight(opts.URL, "/") + "/v1/decisions/stream")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("crowdsec: URL %q: want http://host:port or https://host:port", opts.URL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("crowdsec: URL %q: the key goes in Key, not in the URL", u.Redacted())
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Interval < MinInterval {
		return nil, fmt.Errorf("crowdsec: Interval %v: want at least %v", opts.Interval, MinInterval)
	}
	if len(opts.Types) == 0 {
		opts.Types = []string{"ban"}
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: max(opts.Interval, 5*time.Second)}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	b := &Bouncer{opts: opts, stream: u, types: map[string]bool{}, decisions: map[int64]decision{}}
	for _, t := range opts.Types {
		b.types[strings.ToLower(t)] = true
	}
	return b, nil
}

// BlockList returns the block list this bouncer feeds, named Name, for
// Config.BlockLists. Protectors given it share the bouncer's one set.
func (b *Bouncer) BlockList() protect.BlockList {
	return protect.BlockList{Name: Name, Source: b}
}

// String returns the LAPI's URL: the list's source in protectctl check.
func (b *Bouncer) String() string {
	return strings.TrimSuffix(b.stream.String(), "/v1/decisions/stream")
}

// BlockSet implements protect.BlockSource: the decisions in force.
func (b *Bouncer) BlockSet() *protect.BlockSet { return b.set.Load() }

// BlockSetPointer implements protect.BlockSetPointer: requests load the
// set the bouncer stores, without a call.
func (b *Bouncer) BlockSetPointer() *atomic.Pointer[protect.BlockSet] { return &b.set }

// BlockSourceStatus implements protect.BlockSourceStatuser: Up while the
// LAPI answers, Errors the polls that failed, Checked the last answered.
func (b *Bouncer) BlockSourceStatus() protect.BlockSourceStatus {
	st := protect.BlockSourceStatus{Up: b.up.Load(), Errors: b.errors.Load()}
	if c := b.checked.Load(); c != 0 {
		st.Checked = time.Unix(0, c)
	}
	return st
}

// Run polls the LAPI every Interval until ctx ends, and returns ctx's
// error. A poll that fails is logged when the state changes, and the next
// one is tried at the next interval. Between polls, a decision leaves the
// set when it ends, not at the next poll: the LAPI says nothing of a
// decision that simply runs out. Ended decisions leave in batches a short
// while apart, so one may leave a little after its end
// (docs/blocklists.md says how long): a large set whose decisions each end
// at their own moment would otherwise be made again for every one.
func (b *Bouncer) Run(ctx context.Context) error {
	b.Poll(ctx)
	t := time.NewTicker(b.opts.Interval)
	defer t.Stop()
	end := time.NewTimer(time.Hour)
	defer end.Stop()
	var expired time.Time // when expire last ran, by the wall clock
	for {
		var ended <-chan time.Time
		if left, ok := b.untilNextEnd(); ok {
			end.Reset(max(left, expireGap-time.Since(expired)))
			ended = end.C
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			b.Poll(ctx)
		case <-ended:
			b.expire()
			expired = time.Now()
		}
	}
}

// expireGap is the least time between two rebuilds of the set that Run
// makes for decisions that ended; polls rebuild it too, as they need.
const expireGap = 500 * time.Millisecond

// untilNextEnd is how long until the first decision in force ends, by
// the bouncer's clock; false when none will.
func (b *Bouncer) untilNextEnd() (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nextEnd.IsZero() {
		return 0, false
	}
	return max(b.nextEnd.Sub(b.opts.Clock()), 0), true
}

// ended reports whether a decision in the set has ended by now. It is
// called with b.mu held.
func (b *Bouncer) ended(now time.Time) bool { return !b.nextEnd.IsZero() && !now.Before(b.nextEnd) }

// expire drops from the set the decisions ended by now.
func (b *Bouncer) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now := b.opts.Clock(); b.ended(now) {
		b.rebuild(now)
	}
}

// Poll asks the LAPI once: for every decision while no startup poll has
// been answered, then for what changed since the last. The set in force
// changes only when an answer was read whole; otherwise it stays, and
// decisions still leave it as they expire.
func (b *Bouncer) Poll(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.poll(ctx)
	now := b.opts.Clock()
	if err != nil {
		b.errors.Add(1)
		b.up.Store(false)
		if b.logged != -1 {
			b.logged = -1
			b.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "protect/crowdsec: LAPI down; the last decisions stay in force",
				slog.String("lapi", b.String()), slog.Int("decisions", b.set.Load().Len()), slog.String("err", err.Error()))
		}
		if b.ended(now) {
			b.rebuild(now)
		}
		return err
	}
	b.up.Store(true)
	b.checked.Store(now.UnixNano())
	if b.changed || b.set.Load() == nil || b.ended(now) {
		b.rebuild(now)
	}
	if b.logged != 1 {
		b.logged = 1
		b.opts.Logger.LogAttrs(ctx, slog.LevelInfo, "protect/crowdsec: LAPI up",
			slog.String("lapi", b.String()), slog.Int("decisions", b.set.Load().Len()))
	}
	return nil
}

// streamAnswer is the body of GET /v1/decisions/stream. Either array may
// be null, and so may the whole body.
type streamAnswer struct {
	New     []apiDecision `json:"new"`
	Deleted []apiDecision `json:"deleted"`
}

type apiDecision struct {
	ID       int64  `json:"id"`
	Duration string `json:"duration"`
	Scenario string `json:"scenario"`
	Scope    string `json:"scope"`
	Type     string `json:"type"`
	Value    string `json:"value"`
}

func (b *Bouncer) poll(ctx context.Context) error {
	u := *b.stream
	if !b.started {
		u.RawQuery = "startup=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Api-Key", b.opts.Key)
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Accept", "application/json")
	resp, err := b.opts.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized {
			return fmt.Errorf("crowdsec: %s: %s (is the key one of cscli bouncers list?)", b.String(), resp.Status)
		}
		return fmt.Errorf("crowdsec: %s: %s", b.String(), resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return fmt.Errorf("crowdsec: %s: %w", b.String(), err)
	}
	if len(body) > maxBody {
		return fmt.Errorf("crowdsec: %s: an answer longer than %d bytes", b.String(), maxBody)
	}
	ans, err := decodeStream(body)
	if err != nil {
		return fmt.Errorf("crowdsec: %s: %w", b.String(), err)
	}
	b.apply(ans, b.opts.Clock())
	b.started = true
	return nil
}

// decodeStream reads one answer of the stream; a null body, or null
// arrays, are nothing new.
func decodeStream(body []byte) (*streamAnswer, error) {
	var ans *streamAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("not a decisions stream: %w", err)
	}
	if ans == nil {
		ans = &streamAnswer{}
	}
	return ans, nil
}

// apply applies one answer at now: deletions first, then new decisions,
// as the LAPI lists a decision replaced within one interval in both.
func (b *Bouncer) apply(ans *streamAnswer, now time.Time) {
	for _, d := range ans.Deleted {
		if _, ok := b.decisions[d.ID]; ok {
			delete(b.decisions, d.ID)
			b.changed = true
		}
	}
	for _, d := range ans.New {
		if !b.types[strings.ToLower(d.Type)] {
			continue
		}
		p, ok := decisionPrefix(d.Scope, d.Value)
		if !ok {
			continue
		}
		left, err := ParseDuration(d.Duration)
		if err != nil || left <= 0 {
			continue
		}
		sc, ok := b.scenarios[d.Scenario]
		if !ok {
			if b.scenarios == nil || len(b.scenarios) > 4096 {
				b.scenarios = map[string]string{} // a bound on names that are not shared
			}
			sc = d.Scenario
			b.scenarios[sc] = sc
		}
		b.decisions[d.ID] = decision{prefix: p, scenario: sc, end: now.Add(left)}
		b.changed = true
	}
}

// decisionPrefix reads the value of a decision of scope Ip or Range;
// other scopes (Country, AS, Username) are not addresses.
func decisionPrefix(scope, value string) (netip.Prefix, bool) {
	switch strings.ToLower(scope) {
	case "ip":
		a, err := netip.ParseAddr(strings.TrimSpace(value))
		if err != nil {
			return netip.Prefix{}, false
		}
		a = a.Unmap().WithZone("")
		return netip.PrefixFrom(a, a.BitLen()), true
	case "range":
		p, err := netip.ParsePrefix(strings.TrimSpace(value))
		if err != nil {
			return netip.Prefix{}, false
		}
		return p.Masked(), true
	}
	return netip.Prefix{}, false
}

// rebuild drops the decisions ended at now and puts the rest in force,
// unless together they cover too much of an address family
// (protect.BlockSet.CheckCoverage: Range decisions such as 0.0.0.0/1 and
// 128.0.0.0/1 would refuse every client). Such a set is refused whole,
// counted in Errors and logged once, and the last set stays in force.
func (b *Bouncer) rebuild(now time.Time) {
	entries := make([]protect.BlockEntry, 0, len(b.decisions))
	b.nextEnd = time.Time{}
	for id, d := range b.decisions {
		if !now.Before(d.end) {
			delete(b.decisions, id)
			continue
		}
		if b.nextEnd.IsZero() || d.end.Before(b.nextEnd) {
			b.nextEnd = d.end
		}
		entries = append(entries, protect.BlockEntry{Prefix: d.prefix, Note: d.scenario, Expires: d.end})
	}
	b.changed = false
	set := protect.NewBlockSet(entries)
	if err := set.CheckCoverage(); err != nil {
		b.errors.Add(1)
		if !b.tooWide {
			b.tooWide = true
			b.opts.Logger.LogAttrs(context.Background(), slog.LevelWarn, "protect/crowdsec: decisions refused; the last set stays in force",
				slog.String("list", Name), slog.String("lapi", b.String()), slog.Int("decisions", len(entries)), slog.String("err", err.Error()))
		}
		return
	}
	b.tooWide = false
	b.set.Store(set)
}
