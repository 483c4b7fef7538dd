package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpprotect/protect/store"
	"github.com/redis/go-redis/v9"
)

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// BanCacheTTL is how long this instance answers a ban it has seen
	// without asking Redis [500ms]: a banned flood then costs one round
	// trip per key per BanCacheTTL. A lift elsewhere is seen within it, so
	// keep it under a second. Negative disables the cache.
	BanCacheTTL time.Duration
	// RangeRefresh is how often range bans are re-read from Redis [500ms]:
	// a new range ban or a lift reaches every instance within it (plus a
	// round trip). Negative disables the refresh (for short-lived tools).
	RangeRefresh time.Duration
	// MaxCachedBans caps the local ban cache [65536].
	MaxCachedBans int
	// Clock tells this instance's time, used only for the age of cached
	// answers [time.Now]. Ban and counter expiry use Redis' clock.
	Clock func() time.Time
	// Logger receives refresh failures and configuration warnings
	// [slog.Default()].
	Logger *slog.Logger
	// WaitReplicas is how many replicas of the key's master must have
	// received a count before Take or TakePlan acknowledges it [0: none;
	// negative is 0]: each counting script is followed by WAIT, in the same
	// round trip on the same connection, and a count fewer replicas
	// received is an error wrapping ErrNotReplicated, which the failure
	// policy decides. It closes the window a master's death opens, as
	// long as a replica that acknowledged is the one promoted
	// (docs/redis.md, "No count lost in a failover"), and costs a
	// replica's round trip on every counted request; at least this many
	// replicas must stay up, or every request is the failure policy's.
	// On a Cluster, a key of a migrating slot that has already moved is
	// the failure policy's until the migration ends (its ASK is not
	// followed). It needs a *redis.Client (Sentinel's too),
	// *redis.ClusterClient or *redis.Ring.
	WaitReplicas int
	// WaitTimeout is how long each WAIT waits for the replicas [50ms],
	// and never more than half the time the call has left, so that WAIT
	// answers before StoreTimeout ends the call. Zero or negative is the
	// default.
	WaitTimeout time.Duration
	// JournalLength is about how many events the journal of each ban
	// namespace keeps (store.Journal; journal.go) [1,000,000]: on a
	// single node one stream holds them, on a Cluster each slot's stream
	// keeps about this many. Redis trims whole stream nodes (XADD MAXLEN
	// ~), so a stream may hold up to a node's worth more (100 events by
	// default). Zero or negative is the default.
	JournalLength int
	// JournalAge is about how long the journal keeps an event [7 days],
	// by Redis' clock, trimmed as JournalLength is (XTRIM MINID ~) on
	// every event written and every read. Zero or negative is the
	// default.
	JournalAge time.Duration
}

// Store is the Store shared by every instance of a service: one
// exact limit, as if there were one instance. It runs on any go-redis
// UniversalClient: a single node, Redis Cluster, Sentinel, or Valkey.
//
// Each Take is one round trip: one EVALSHA of an embedded Lua script (EVAL
// only when the server answers NOSCRIPT). A client's keys are
// <Namespace>{<key>}:c (counter), <BanNamespace>{<key>}:b (ban) and
// <BanNamespace>{<key>}:o (offenses); the braces are a hash tag, so the
// three sit in one cluster slot whatever the namespaces, and the script is
// legal on Redis Cluster. Expiry is Redis' own (PX), by Redis' clock.
//
// Key bans are listed from an index that the scripts keep beside them
// (index.go), never by scanning the keyspace.
//
// Range bans live in one hash, <BanNamespace>ranges, and are checked against
// a local copy refreshed every RangeRefresh; bans this instance has seen
// are answered from a local cache for BanCacheTTL. Both keep a banned
// flood off Redis, and both are bounded in age so that a lift reaches
// every instance within a second. codec.go describes the ban record.
//
// The zero value is not usable: make one with New or Dial.
type Store struct {
	client   redis.UniversalClient
	ownsConn bool

	topo   topology  // the shape of the Redis behind client (topology.go)
	bans   banCache  // namespaces, range bans and key bans held here (bancache.go)
	damage damages   // damaged records met (damage.go)
	pub    publisher // published limits (published.go)

	// WAIT after each counting script (replicated.go).
	waitReplicas int64
	waitFor      time.Duration

	refresh time.Duration
	clock   func() time.Time
	epoch   time.Time
	log     *slog.Logger
	circuit store.Circuit // shared by every protector on this store

	boundMu sync.Mutex              // guards bound
	bound   map[string]store.Limits // each Namespace's store.Limits, as first bound

	journal string // the journal's bounds, "length|age ms", as the scripts read them (journal.go)

	plans     sync.Map     // *store.Plan → *planArgs (plan.go)
	planCount atomic.Int64 // entries in plans, about

	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// New returns a store on client and starts the range refresher.
// Close stops it; the client stays yours to close.
//
// For the limiter to stay within Config.StoreTimeout, the client must
// honour context deadlines: set ContextTimeoutEnabled in its options.
// The counting scripts are never retried, whatever the client's
// MaxRetries (noretry.go). Dial does both. A client without ContextTimeoutEnabled is
// logged as a warning.
func New(client redis.UniversalClient, opt Options) *Store {
	if opt.BanCacheTTL == 0 {
		opt.BanCacheTTL = 500 * time.Millisecond
	}
	if opt.RangeRefresh == 0 {
		opt.RangeRefresh = 500 * time.Millisecond
	}
	if opt.MaxCachedBans <= 0 {
		opt.MaxCachedBans = 1 << 16
	}
	if opt.Clock == nil {
		opt.Clock = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.WaitTimeout <= 0 {
		opt.WaitTimeout = defaultWaitTimeout
	}
	if opt.JournalLength <= 0 {
		opt.JournalLength = defaultJournalLength
	}
	if opt.JournalAge <= 0 {
		opt.JournalAge = defaultJournalAge
	}
	s := &Store{
		client: client,
		topo:   topology{client: client, log: opt.Logger},
		bans: banCache{ttl: opt.BanCacheTTL, max: opt.MaxCachedBans,
			namespaces: make(map[string]*redisNamespace), keys: make(map[cacheKey]cachedBan)},
		damage:  damages{max: opt.MaxCachedBans, log: opt.Logger},
		pub:     publisher{client: client},
		refresh: opt.RangeRefresh,
		clock:   opt.Clock,
		epoch:   opt.Clock(),
		log:     opt.Logger,
		bound:   make(map[string]store.Limits),
		stop:    make(chan struct{}),
		journal: fmt.Sprintf("%d|%d", opt.JournalLength, max(opt.JournalAge.Milliseconds(), 1)),
	}
	s.waitReplicas, s.waitFor = int64(max(opt.WaitReplicas, 0)), opt.WaitTimeout
	if s.waitReplicas > 0 && !canWait(client) {
		s.log.Error("protect: every counted request is decided by the failure policy", "error", errWaitClient)
	}
	if !contextTimeouts(client) {
		s.log.Warn("protect: redis client ignores context deadlines; set ContextTimeoutEnabled so that StoreTimeout bounds every call")
	}
	if s.refresh > 0 {
		s.wg.Add(1)
		go s.refreshEvery(s.refresh)
	}
	return s
}

// Addr names the server the store talks to, for messages: its address,
// a Cluster's seed addresses, or for a Sentinel URL Dial was given, that
// URL redacted.
func (s *Store) Addr() string { return s.topo.addr() }

// Ping checks that Redis answers; the error names the address.
func (s *Store) Ping(ctx context.Context) error {
	var timeout time.Duration // for the message
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d).Round(time.Millisecond)
	}
	if err := s.client.Ping(ctx).Err(); err != nil {
		return store.ExplainError(fmt.Errorf("protect: redis at %s does not answer: %w", s.Addr(), err), timeout)
	}
	return nil
}

// Client returns the go-redis client the store uses.
func (s *Store) Client() redis.UniversalClient { return s.client }

// Close stops the refresher, and closes the client if Dial made it.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.stop)
		s.wg.Wait()
		if s.ownsConn {
			err = s.client.Close()
		}
	})
	return err
}

// now returns this instance's time in ticks, for the age of what it
// holds locally. Ban and counter expiry use Redis' clock.
func (s *Store) now() int64 { return int64(s.clock().Sub(s.epoch)) }

// Space implements Store. A namespace holding '{' or '}' is refused: it
// would move every key's hash tag, and with it the keys of one client
// out of one cluster slot.
func (s *Store) Space(scope store.Scope) (store.Space, error) {
	for _, ns := range [...]string{scope.Namespace, scope.BanNamespace} {
		if strings.ContainsAny(ns, "{}") {
			return nil, fmt.Errorf("protect: redis store: namespace %q must not contain { or }", ns)
		}
	}
	if err := scope.Limits.Check(); err != nil {
		return nil, err
	}
	lim := scope.Limits
	s.boundMu.Lock()
	was, ok := s.bound[scope.Namespace]
	err := store.LimitsDiffer(scope.Namespace, was, ok, lim)
	if err == nil {
		s.bound[scope.Namespace] = lim
	}
	s.boundMu.Unlock()
	if err != nil {
		return nil, err
	}
	sp := &redisSpace{lim: lim, s: s, ns: scope.Namespace, bns: s.bans.namespace(banNamespace(scope))}
	// The take script's arguments, boxed once here rather than on every
	// request: n, and the limits in one string.
	limits := fmt.Sprintf("%d|%d|%d|%s|%d|%d|%s|%s", max(lim.TTL.Milliseconds(), 1), lim.BanLimit, lim.BanDuration.Milliseconds(),
		strconv.FormatFloat(lim.BanFactor, 'g', -1, 64), lim.MaxBanDuration.Milliseconds(), lim.OffenseWindow.Milliseconds(),
		s.journal, lim.Reason())
	for n := range sp.args {
		sp.args[n] = []any{int64(n), limits}
	}
	return sp, nil
}

// checkRedisKey refuses a key that cannot name Redis keys: an empty one,
// or a name with a brace, which would move the hash tag (ConsumerKey
// never makes one).
func checkRedisKey(k store.Key) error {
	switch {
	case k.IsZero():
		return store.ErrEmptyKey
	case strings.ContainsAny(k.Name, "{}"):
		return fmt.Errorf("protect: redis store: key %q: must not contain { or }", k.Name)
	}
	return nil
}

// redisSpace is a Store bound to one Scope.
type redisSpace struct {
	s    *Store
	lim  store.Limits
	ns   string          // counters and plan states
	bns  *redisNamespace // bans and offenses, with their local copies
	args [2][]any        // the take script's arguments for n = 0 and n = 1
}

// scriptKeys returns the declared keys of the take and plan scripts: k's
// base <ns>{<key>}, and its ban base <bns>{<key>} when the ban namespace
// is another (the scripts use the first for both when it is not, which
// keeps the usual request's command short).
//
// On Redis Cluster a third key names the index of key bans in k's slot
// (index.go), which the scripts cannot derive; elsewhere they derive
// <bns>bans from the ban base, and the command stays as short.
func (sp *redisSpace) scriptKeys(k store.Key) []string {
	if sp.s.topo.isCluster() {
		return []string{redisBase(sp.ns, k), redisBase(sp.bns.name, k), sp.s.indexKey(sp.bns.name, k)}
	}
	if sp.bns.name == sp.ns {
		return []string{redisBase(sp.ns, k)}
	}
	return []string{redisBase(sp.ns, k), redisBase(sp.bns.name, k)}
}

// DeadlineOnly implements store.DeadlineSpace: go-redis uses a
// context's deadline (for the socket, when ContextTimeoutEnabled is set;
// New warns when it is not), its Done channel and its Err, and nothing
// else.
func (*redisSpace) DeadlineOnly() bool { return true }

// Circuit implements store.CircuitStore: one breaker for the store's
// one pool.
func (s *Store) Circuit() *store.Circuit { return &s.circuit }

// banNamespace is where scope's bans live: BanNamespace, or Namespace
// when that is empty.
func banNamespace(scope store.Scope) string {
	if scope.BanNamespace != "" {
		return scope.BanNamespace
	}
	return scope.Namespace
}

// takeArgs returns the take script's arguments for counting n.
func (sp *redisSpace) takeArgs(n int64) []any {
	if n < int64(len(sp.args)) {
		return sp.args[n]
	}
	a := slices.Clone(sp.args[1])
	a[0] = n
	return a
}

// Take implements Space: one round trip, or none when a range ban or a
// cached ban answers.
func (sp *redisSpace) Take(ctx context.Context, k store.Key, addr netip.Addr, n int64) (store.Result, error) {
	if err := checkRedisKey(k); err != nil {
		return store.Result{}, err
	}
	s := sp.s
	t := s.now()
	if err := s.ready(ctx, sp.bns); err != nil {
		return store.Result{}, err
	}
	if al := sp.bns.allows.Load(); al != nil && lookupAllow(al, addr, t) { // nothing allowed: one compare
		return store.Result{Allowed: true}, nil
	}
	if r, banned := rangeBanned(sp.bns.ranges.Load(), addr, t); banned {
		return r, nil
	}
	if r, ok := s.bans.lookup(sp.bns, k, t); ok {
		return r, nil
	}
	keys := sp.scriptKeys(k)
	args := sp.takeArgs(n)
	dmg := s.damage.damaged(sp.bns, k)
	if dmg != nil {
		args = append(slices.Clone(args), dmg.sha)
	}
	for try := 0; ; try++ {
		v, err := takeScript.Run(ctx, s.counting(), keys, args...).Result()
		if err != nil {
			return store.Result{}, fmt.Errorf("protect: redis take %s: %w", k, err)
		}
		tr, err := decodeTake(v, k)
		if err != nil {
			return store.Result{}, fmt.Errorf("protect: redis take %s: %w", k, err)
		}
		switch {
		case tr.bad != nil:
			// A damaged record this store did not know: ask again,
			// ignoring it. One that changes on every try (someone writing
			// garbage in a loop) is left uncounted after a few.
			_, bk, _ := redisKeys(sp.ns, sp.bns.name, k)
			dmg = s.damage.remember(sp.bns, k, bk, tr.bad.rec, tr.bad.err)
			if try == 0 {
				s.indexDamage(ctx, sp.bns, k)
			}
			if try == 2 {
				return store.Result{}, dmg.err
			}
			args = append(slices.Clone(sp.takeArgs(n)), dmg.sha)
			continue
		case tr.ignored:
			s.bans.seenUnbanned(sp.bns, k, t)
			return tr.res, dmg.err
		case tr.counter != "":
			// Damage to this key's counter, repaired by the script: the
			// result stands, and the guard counts and logs the damage
			// once, never against the breaker (malformed.go).
			ck, _, _ := redisKeys(sp.ns, sp.bns.name, k)
			return tr.res, &store.MalformedError{Key: ck, Record: store.QuoteMalformed(tr.counter), Err: errCounterReset}
		case dmg != nil:
			s.damage.forget(sp.bns, k) // lifted or replaced
		}
		if tr.res.Banned() {
			s.bans.remember(sp.bns, k, tr.res, t)
		} else {
			s.bans.seenUnbanned(sp.bns, k, t)
		}
		return tr.res, nil
	}
}

// errCounterReset says what a take did with a counter that held no
// count.
var errCounterReset = errors.New("not a count; deleted, and counted again from nothing")

// AddBan implements Space.
func (sp *redisSpace) AddBan(ctx context.Context, b store.Ban, length time.Duration) (store.Ban, error) {
	b, err := store.CheckBan(b)
	if err != nil {
		return store.Ban{}, err
	}
	if err := checkRedisKey(b.Key); err != nil {
		return store.Ban{}, err
	}
	s := sp.s
	// The allowlist as this store last read it: a store that serves the
	// namespace holds a copy, and one that does not (a tool) is checked
	// by admin.Admin.Ban, so that a ban costs no round trip more.
	if b.Key.Prefix.IsValid() && sp.bns.loaded.Load() && allowCovers(sp.bns, b.Key.Prefix, s.now()) {
		return store.Ban{}, fmt.Errorf("protect: redis ban %s: %w", b.Key, store.ErrAllowed)
	}
	ms := length.Milliseconds()
	if length > 0 && ms == 0 {
		ms = 1 // under a millisecond is not "permanent"
	}
	var (
		keys []string
		kind = "key"
	)
	if b.Range {
		keys, kind = []string{rangesKey(sp.bns.name), s.rangeStreamKey(sp.bns.name)}, "range"
	} else {
		c, bk, _ := redisKeys(sp.ns, sp.bns.name, b.Key)
		keys = []string{c, bk, s.indexKey(sp.bns.name, b.Key)}
	}
	rec, err := banScript.Run(ctx, s.client, keys, ms, string(b.Source), b.By, b.Reason, kind, b.Key.String(), s.journal).Text()
	if err != nil {
		return store.Ban{}, fmt.Errorf("protect: redis ban %s: %w", b.Key, err)
	}
	stored, err := decodeBan(b.Key, b.Range, rec)
	if err != nil {
		return store.Ban{}, fmt.Errorf("protect: redis ban %s: %w", b.Key, err)
	}
	if b.Range {
		s.reloadRanges(ctx, sp.bns)         // this instance sees it at once
		if b.Source != store.SourceManual { // see Space.AddBan: escalation resets nothing
			return stored, nil
		}
		if err := sp.resetRange(ctx, b.Key.Prefix); err != nil {
			// The ban holds; the counters inside it expire within TTL,
			// as no banned request is counted.
			s.log.Warn("protect: range ban written, but the counters inside it were not reset", "range", b.Key.String(), "error", err)
		}
	} else {
		s.bans.forget(sp.bns, b.Key)
	}
	return stored, nil
}

// Lift implements Space. A prefix may name a counting key and a range
// alike, so both are lifted.
func (sp *redisSpace) Lift(ctx context.Context, k store.Key) (store.Ban, bool, error) {
	if err := checkRedisKey(k); err != nil {
		return store.Ban{}, false, err
	}
	s := sp.s
	s.bans.forget(sp.bns, k)
	var lifted store.Ban
	found := false
	if k.Prefix.IsValid() {
		_, bans, err := s.rangeCall(ctx, sp.bns.name, "lift", k.String())
		if err != nil {
			return store.Ban{}, false, err
		}
		if len(bans) > 0 {
			lifted, found = bans[0], true
			s.reloadRanges(ctx, sp.bns)
		}
	}
	_, bk, _ := redisKeys(sp.ns, sp.bns.name, k)
	v, err := unbanScript.Run(ctx, s.client, []string{bk, s.indexKey(sp.bns.name, k)}, k.String(), s.journal).Slice()
	switch {
	case errors.Is(err, redis.Nil):
		return lifted, found, nil
	case err != nil:
		return store.Ban{}, false, fmt.Errorf("protect: redis lift %s: %w", k, err)
	}
	s.damage.forget(sp.bns, k)
	// A damaged record is lifted too, and reported so: it was there, and
	// is gone.
	return unbanned(k, v), true, nil
}

// Bans implements Space, under ctx's deadline alone. Range bans are one
// read of one hash; key bans are read from their index (index.go),
// never found by scanning the keyspace.
func (sp *redisSpace) Bans(ctx context.Context, f store.BanFilter) ([]store.Ban, error) {
	return sp.BansPaged(ctx, f, 0)
}

// BansPaged implements store.BanPager: Bans with a deadline of perPage on each page of a listing
// rather than one on the whole: a namespace may hold any number of bans.
func (sp *redisSpace) BansPaged(ctx context.Context, f store.BanFilter, perPage time.Duration) ([]store.Ban, error) {
	s := sp.s
	pctx, cancel := pageContext(ctx, perPage)
	_, ranges, err := s.rangeCall(pctx, sp.bns.name, "list")
	cancel()
	if err != nil {
		return nil, err
	}
	var out []store.Ban
	for _, b := range ranges {
		if f.Match(b) {
			out = append(out, b)
		}
	}
	if f.RangesOnly {
		return out, nil
	}
	var mu sync.Mutex
	keep := func(b store.Ban) {
		mu.Lock()
		out = append(out, b)
		mu.Unlock()
	}
	if err := sp.listKeyBans(ctx, f, perPage, keep); err != nil {
		return nil, fmt.Errorf("protect: redis list bans: %w", err)
	}
	return out, nil
}

// globEscape escapes SCAN MATCH metacharacters.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Inspect implements Space.
func (sp *redisSpace) Inspect(ctx context.Context, k store.Key) (store.KeyState, error) {
	if err := checkRedisKey(k); err != nil {
		return store.KeyState{}, err
	}
	s := sp.s
	c, b, o := redisKeys(sp.ns, sp.bns.name, k)
	v, err := inspectScript.Run(ctx, s.client, []string{c, b, o}, sp.lim.OffenseWindow.Milliseconds()).Slice()
	if err != nil {
		return store.KeyState{}, fmt.Errorf("protect: redis inspect %s: %w", k, err)
	}
	if len(v) != 5 {
		return store.KeyState{}, fmt.Errorf("protect: redis inspect %s: unexpected reply", k)
	}
	var n [3]int64
	for i := range n {
		if n[i], err = toInt(v[i]); err != nil {
			return store.KeyState{}, fmt.Errorf("protect: redis inspect %s: %w", k, err)
		}
	}
	st := store.KeyState{Key: k, Count: n[0], Offenses: int(n[2])}
	if st.Usage, err = sp.planUsage(ctx, k); err != nil {
		return store.KeyState{}, err
	}
	if n[1] > 0 {
		st.CountTTL = time.Duration(n[1]) * time.Millisecond
	}
	if rec := str(v[3]); rec != "" {
		pttl, _ := toInt(v[4])
		ban := readBan(k, false, rec, pttl) // a damaged record is shown as such
		st.Ban = &ban
	} else if k.Prefix.IsValid() {
		_, bans, err := s.rangeCall(ctx, sp.bns.name, "get", k.String())
		if err != nil {
			return store.KeyState{}, err
		}
		if len(bans) > 0 {
			st.Ban = &bans[0]
		}
	}
	return st, nil
}

// resetRange deletes the space's counters inside range r, as ban.lua
// deletes a banned key's: a lifted range starts from nothing. Counters
// are found by SCAN on every master, narrowed by the text every key
// inside r starts with (rangeText), and each checked by parsing its key.
// An operator's ban can afford the scan; no request waits for it: an
// automatic range ban (escalation, inside a client's request) resets
// nothing (resetsRange).
func (sp *redisSpace) resetRange(ctx context.Context, r netip.Prefix) error {
	pattern := globEscape(sp.ns+"{"+rangeText(r)) + "*}:c"
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		var del []string
		for iter.Next(ctx) {
			key := iter.Val()
			s := strings.TrimSuffix(strings.TrimPrefix(key, sp.ns+"{"), "}:c")
			if k, err := store.ParseKey(s); err == nil && k.Prefix.IsValid() && (store.BanFilter{Within: r}).Match(store.Ban{Key: k}) {
				del = append(del, key)
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		for _, key := range del { // one key a command: keys of many slots
			if err := c.Del(ctx, key).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	return sp.s.topo.eachNode(ctx, scan)
}

// rangeText is the text that every key inside r starts with: the whole
// octets of an IPv4 range ("198.51.100."), the leading non-zero groups of
// an IPv6 one ("2001:db8:"; a zero group may be written as "::"). "" when
// nothing is certain.
func rangeText(r netip.Prefix) string {
	a := r.Addr()
	var b strings.Builder
	if a.Is4() {
		o := a.As4()
		for i := 0; i < r.Bits()/8 && i < 3; i++ {
			b.WriteString(strconv.Itoa(int(o[i])))
			b.WriteByte('.')
		}
		return b.String()
	}
	o := a.As16()
	for i := 0; i < r.Bits()/16 && i < 7; i++ {
		g := uint64(o[2*i])<<8 | uint64(o[2*i+1])
		if g == 0 {
			break
		}
		b.WriteString(strconv.FormatUint(g, 16))
		b.WriteByte(':')
	}
	return b.String()
}
