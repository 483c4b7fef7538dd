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
// whose type is one of Options.Types (ban by default), and feeds those
// of Options.ChallengeTypes (captcha by default) to a second list,
// marked to challenge (ChallengeList): a protector with Config.Challenge
// gives those clients its proof-of-work page. Each ends when the
// LAPI deletes it or its duration runs out, whichever comes first. While
// the LAPI cannot be reached the last set stays in force (a CrowdSec
// restart must not open the door), the change of state is logged once
// each way, and BlockSourceStatus reports it for metrics.
//
// The other way round, a Machine tells the LAPI of a protector's bans as
// a CrowdSec machine does of its own (see NewMachine): every bouncer of
// that LAPI then enforces them.
//
//	m, err := crowdsec.NewMachine(crowdsec.MachineOptions{URL: "http://127.0.0.1:8080", MachineID: id, Password: pw})
//	done, err := m.Start(ctx, admin.New(p))
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

// ChallengeName is the name of the list of the decisions to challenge
// (ChallengeList).
const ChallengeName = "crowdsec-captcha"

// maxBody bounds one answer of the LAPI: a startup with the community
// blocklist is a few megabytes, and 64 MiB holds about 400,000
// decisions. An answer is read as it arrives, one decision at a time,
// so what it costs is the decisions kept, never the body.
const maxBody = 64 << 20

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
	// Types are the decision types refused [ban]. Listing captcha here
	// refuses those clients outright instead of challenging them.
	Types []string
	// ChallengeTypes are the decision types challenged, through
	// ChallengeList [captcha, unless Types lists it]; a type may not be
	// in both. Write []string{} for none.
	ChallengeTypes []string
	// SkipPushed leaves out the decisions that a protect Machine pushed
	// (their scenario begins with ScenarioPrefix) [false: kept]. Set it
	// where the protector that enforces this bouncer's lists has those
	// bans in its own store (protectd sets it when it is the Machine of
	// the same LAPI): taken back, a ban would be refused a second time
	// as Blocked, past its lift until the Machine's deletion reached
	// the LAPI, and for its whole length if that deletion never did.
	SkipPushed bool
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
	types  map[string]bool // true: refused; false: challenged

	set     atomic.Pointer[protect.BlockSet]
	chal    challengeSource // the decisions to challenge (ChallengeList)
	up      atomic.Bool
	errors  atomic.Uint64
	checked atomic.Int64 // the clock's Unix nanoseconds of the last answered poll; 0 before

	// pollMu makes polls one at a time. mu guards what follows it and is
	// never held while the LAPI is asked, so that decisions leave the
	// set as they end even while a poll waits on a server that hangs.
	pollMu    sync.Mutex
	mu        sync.Mutex
	decisions map[int64]decision
	started   bool              // the startup poll was answered
	nextEnd   time.Time         // the earliest end of a decision in the set; zero when none
	logged    int               // the state last logged: 0 none, 1 up, -1 down
	changed   bool              // decisions came or went since the set was made
	scenarios map[string]string // one copy of each scenario's name: thousands of decisions share a few
	tooWide   bool              // the last ban set made was refused (protect.BlockSet.CheckCoverage)
	chalWide  bool              // the same, of the set to challenge
}

// decision is one decision in force.
type decision struct {
	prefix    netip.Prefix
	scenario  string
	end       time.Time
	challenge bool // of a ChallengeTypes type
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
	defaultChallenge := opts.ChallengeTypes == nil
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
	if defaultChallenge && !b.types["captcha"] { // captcha in Types: refused, as it asks
		opts.ChallengeTypes = []string{"captcha"}
	}
	for _, t := range opts.ChallengeTypes {
		if b.types[strings.ToLower(t)] {
			return nil, fmt.Errorf("crowdsec: type %q is in both Types and ChallengeTypes", t)
		}
		b.types[strings.ToLower(t)] = false
	}
	b.chal.b = b
	return b, nil
}

// BlockList returns the block list this bouncer feeds, named Name, for
// Config.BlockLists. Protectors given it share the bouncer's one set.
func (b *Bouncer) BlockList() protect.BlockList {
	return protect.BlockList{Name: Name, Source: b}
}

// ChallengeList returns the list of the decisions of ChallengeTypes,
// named ChallengeName and marked to challenge (protect.BlockList's
// Challenge), for Config.BlockLists beside BlockList. Give it to a
// protector with Config.Challenge: without one its entries are Blocked.
func (b *Bouncer) ChallengeList() protect.BlockList {
	return protect.BlockList{Name: ChallengeName, Source: &b.chal, Challenge: true}
}

// challengeSource is the source of ChallengeList: the bouncer's second
// set, with its status.
type challengeSource struct {
	b   *Bouncer
	set atomic.Pointer[protect.BlockSet]
}

func (c *challengeSource) BlockSet() *protect.BlockSet                        { return c.set.Load() }
func (c *challengeSource) BlockSetPointer() *atomic.Pointer[protect.BlockSet] { return &c.set }
func (c *challengeSource) BlockSourceStatus() protect.BlockSourceStatus {
	return c.b.BlockSourceStatus()
}
func (c *challengeSource) String() string { return c.b.String() }

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
	polled := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var polls sync.WaitGroup
	polls.Add(1)
	go func() { // polls apart from expiry: an answer that hangs delays no end
		defer polls.Done()
		t := time.NewTicker(b.opts.Interval)
		defer t.Stop()
		for {
			b.Poll(ctx)
			select {
			case polled <- struct{}{}:
			default:
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	defer polls.Wait()
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
		case <-polled: // the set may hold new ends
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
	b.pollMu.Lock()
	defer b.pollMu.Unlock()
	b.mu.Lock()
	started := b.started
	b.mu.Unlock()
	ans, err := b.fetch(ctx, started)
	b.mu.Lock()
	defer b.mu.Unlock()
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
	b.apply(ans, now)
	b.started = true
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

// streamAnswer is one answer of GET /v1/decisions/stream, as read: the
// ids deleted, and the new decisions this bouncer keeps (of its types,
// of an address scope, with time left).
type streamAnswer struct {
	deleted []int64
	added   []added
}

// added is a new decision of an answer, with the time left it was given.
type added struct {
	id        int64
	prefix    netip.Prefix
	scenario  string
	left      time.Duration
	challenge bool
}

// apiDecision is a decision as the LAPI writes it.
type apiDecision struct {
	ID       int64  `json:"id"`
	Duration string `json:"duration"`
	Scenario string `json:"scenario"`
	Scope    string `json:"scope"`
	Type     string `json:"type"`
	Value    string `json:"value"`
}

// fetch asks the LAPI once, with no lock held: for every decision unless
// started, else for what changed.
func (b *Bouncer) fetch(ctx context.Context, started bool) (*streamAnswer, error) {
	u := *b.stream
	if !started {
		u.RawQuery = "startup=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Api-Key", b.opts.Key)
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Accept", "application/json")
	resp, err := b.opts.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized {
			return nil, fmt.Errorf("crowdsec: %s: %s (is the key one of cscli bouncers list?)", b.String(), resp.Status)
		}
		return nil, fmt.Errorf("crowdsec: %s: %s", b.String(), resp.Status)
	}
	lr := &io.LimitedReader{R: resp.Body, N: maxBody + 1}
	ans, err := b.readStream(lr)
	if lr.N <= 0 {
		return nil, fmt.Errorf("crowdsec: %s: an answer longer than %d bytes", b.String(), maxBody)
	}
	if err != nil {
		return nil, fmt.Errorf("crowdsec: %s: %w", b.String(), err)
	}
	return ans, nil
}

// readStream reads one answer of the stream from r a decision at a time,
// keeping only what apply uses. A null body, or null arrays, are nothing
// new; keys other than new and deleted are skipped.
func (b *Bouncer) readStream(r io.Reader) (*streamAnswer, error) {
	dec := json.NewDecoder(r)
	ans := &streamAnswer{}
	bad := func(err error) (*streamAnswer, error) {
		return nil, fmt.Errorf("not a decisions stream: %w", err)
	}
	tok, err := dec.Token()
	if err != nil {
		return bad(err)
	}
	if tok != nil {
		if tok != json.Delim('{') {
			return bad(fmt.Errorf("%v where an object was", tok))
		}
		scenarios := map[string]string{}
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return bad(err)
			}
			// Keys match as encoding/json matches them: without case,
			// and the last of two alike wins.
			k, _ := key.(string)
			deleted := strings.EqualFold(k, "deleted")
			switch {
			case deleted:
				ans.deleted = ans.deleted[:0]
			case strings.EqualFold(k, "new"):
				ans.added = ans.added[:0]
			default:
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return bad(err)
				}
				continue
			}
			if err := eachDecision(dec, func(d *apiDecision) {
				if deleted {
					ans.deleted = append(ans.deleted, d.ID)
				} else if a, ok := b.keep(d, scenarios); ok {
					ans.added = append(ans.added, a)
				}
			}); err != nil {
				return bad(fmt.Errorf("%s: %w", k, err))
			}
		}
		if _, err := dec.Token(); err != nil { // the closing brace
			return bad(err)
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad(errors.New("more after the answer"))
	}
	return ans, nil
}

// eachDecision calls f with each decision of the array (or null) dec is
// at, decoding one at a time.
func eachDecision(dec *json.Decoder, f func(*apiDecision)) error {
	tok, err := dec.Token()
	if err != nil || tok == nil {
		return err
	}
	if tok != json.Delim('[') {
		return fmt.Errorf("%v where an array was", tok)
	}
	for dec.More() {
		var d apiDecision
		if err := dec.Decode(&d); err != nil {
			return err
		}
		f(&d)
	}
	_, err = dec.Token() // the closing bracket
	return err
}

// keep reports whether the bouncer keeps a new decision d, and what of
// it: one of its types, of an address scope, with time left. Scenario
// names are shared through scenarios, as thousands of decisions name a
// few.
func (b *Bouncer) keep(d *apiDecision, scenarios map[string]string) (added, bool) {
	refused, ok := b.types[strings.ToLower(d.Type)]
	if !ok {
		return added{}, false
	}
	if b.opts.SkipPushed && strings.HasPrefix(d.Scenario, ScenarioPrefix) {
		return added{}, false
	}
	p, ok := decisionPrefix(d.Scope, d.Value)
	if !ok {
		return added{}, false
	}
	left, err := ParseDuration(d.Duration)
	if err != nil || left <= 0 {
		return added{}, false
	}
	sc, ok := scenarios[d.Scenario]
	if !ok {
		sc = d.Scenario
		if len(scenarios) < 4096 { // a bound on names that are not shared
			scenarios[sc] = sc
		}
	}
	return added{id: d.ID, prefix: p, scenario: sc, left: left, challenge: !refused}, true
}

// apply applies one answer at now: deletions first, then new decisions,
// as the LAPI lists a decision replaced within one interval in both. It
// is called with b.mu held.
func (b *Bouncer) apply(ans *streamAnswer, now time.Time) {
	for _, id := range ans.deleted {
		if _, ok := b.decisions[id]; ok {
			delete(b.decisions, id)
			b.changed = true
		}
	}
	for _, a := range ans.added {
		sc, ok := b.scenarios[a.scenario]
		if !ok {
			if b.scenarios == nil || len(b.scenarios) > 4096 {
				b.scenarios = map[string]string{} // a bound on names that are not shared
			}
			sc = a.scenario
			b.scenarios[sc] = sc
		}
		b.decisions[a.id] = decision{prefix: a.prefix, scenario: sc, end: now.Add(a.left), challenge: a.challenge}
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
// the bans and those to challenge each as a set, unless a set covers too
// much of an address family (protect.BlockSet.CheckCoverage: Range
// decisions such as 0.0.0.0/1 and 128.0.0.0/1 would refuse every
// client). Such a set is refused whole, counted in Errors and logged
// once, and its last set stays in force; the other is made as usual.
func (b *Bouncer) rebuild(now time.Time) {
	entries := make([]protect.BlockEntry, 0, len(b.decisions))
	var challenges []protect.BlockEntry
	b.nextEnd = time.Time{}
	for id, d := range b.decisions {
		if !now.Before(d.end) {
			delete(b.decisions, id)
			continue
		}
		if b.nextEnd.IsZero() || d.end.Before(b.nextEnd) {
			b.nextEnd = d.end
		}
		e := protect.BlockEntry{Prefix: d.prefix, Note: d.scenario, Expires: d.end}
		if d.challenge {
			challenges = append(challenges, e)
		} else {
			entries = append(entries, e)
		}
	}
	b.changed = false
	// Each set alone: a captcha decision too wide must not stop the bans
	// from going on, nor the reverse.
	b.store(&b.set, &b.tooWide, Name, entries)
	b.store(&b.chal.set, &b.chalWide, ChallengeName, challenges)
}

// store makes entries the set of list, unless they cover too much of an
// address family: then it counts an error, logs it once (tooWide says
// whether it did), and leaves the last set in force.
func (b *Bouncer) store(set *atomic.Pointer[protect.BlockSet], tooWide *bool, list string, entries []protect.BlockEntry) {
	s := protect.NewBlockSet(entries)
	if err := s.CheckCoverage(); err != nil {
		b.errors.Add(1)
		if !*tooWide {
			*tooWide = true
			b.opts.Logger.LogAttrs(context.Background(), slog.LevelWarn, "protect/crowdsec: decisions refused; the last set stays in force",
				slog.String("list", list), slog.String("lapi", b.String()), slog.Int("decisions", len(entries)), slog.String("err", err.Error()))
		}
		return
	}
	*tooWide = false
	set.Store(s)
}
