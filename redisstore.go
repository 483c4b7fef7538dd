package protect

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/take.lua
	takeLua string
	//go:embed lua/ban.lua
	banLua string
	//go:embed lua/lift.lua
	liftLua string
	//go:embed lua/inspect.lua
	inspectLua string
	//go:embed lua/ranges.lua
	rangesLua string
)

// RedisOptions configure a RedisStore. The zero value is ready to use.
type RedisOptions struct {
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
}

// RedisStore is the Store shared by every instance of a service: one
// exact limit, as if there were one instance. It runs on any go-redis
// UniversalClient: a single node, Redis Cluster, Sentinel, or Valkey.
//
// Each Take is one round trip: one EVALSHA of an embedded Lua script (EVAL
// only when the server answers NOSCRIPT). A client's keys are
// <namespace>{<key>}:c (counter), :b (ban) and :o (offenses); the braces
// are a hash tag, so the three sit in one cluster slot and the script is
// legal on Redis Cluster. Expiry is Redis' own (PX), by Redis' clock.
//
// Range bans live in one hash, <namespace>ranges, and are checked against
// a local copy refreshed every RangeRefresh; bans this instance has seen
// are answered from a local cache for BanCacheTTL. Both keep a banned
// flood off Redis, and both are bounded in age so that a lift reaches
// every instance within a second.
//
// The zero value is not usable: make one with NewRedisStore or DialRedis.
type RedisStore struct {
	client   redis.UniversalClient
	ownsConn bool
	take     *redis.Script
	ban      *redis.Script
	lift     *redis.Script
	inspect  *redis.Script
	ranges   *redis.Script

	cacheTTL time.Duration
	maxCache int
	refresh  time.Duration
	clock    func() time.Time
	epoch    time.Time
	log      *slog.Logger

	mu     sync.Mutex // guards cache
	cache  map[cacheKey]cachedBan
	cached atomic.Int64 // len(cache), read without the lock
	spaces sync.Map     // namespace → *redisSpace
	args   sync.Map     // Limits → []any: the script's limit arguments, boxed once

	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

type cacheKey struct {
	ns string
	k  Key
}

type cachedBan struct {
	ban   *Ban
	until int64 // ticks: the cached answer is used until then
	end   int64 // ticks: when the ban ends; 0 when permanent
}

// redisSpace is the local state of one namespace: its range bans.
type redisSpace struct {
	ranges atomic.Pointer[rangeSnap] // nil: none
	loaded atomic.Bool
	mu     sync.Mutex // serialises the first load
}

// NewRedisStore returns a store on client and starts the range refresher.
// Close stops it; the client stays yours to close.
//
// For the limiter to stay within Config.StoreTimeout, the client must
// honour context deadlines: set ContextTimeoutEnabled in its options, and
// MaxRetries: -1 (a retried script whose first reply was lost counts
// twice). DialRedis does both. A client without ContextTimeoutEnabled is
// logged as a warning.
func NewRedisStore(client redis.UniversalClient, opt RedisOptions) *RedisStore {
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
	s := &RedisStore{
		client:   client,
		take:     redis.NewScript(takeLua),
		ban:      redis.NewScript(banLua),
		lift:     redis.NewScript(liftLua),
		inspect:  redis.NewScript(inspectLua),
		ranges:   redis.NewScript(rangesLua),
		cacheTTL: opt.BanCacheTTL,
		maxCache: opt.MaxCachedBans,
		refresh:  opt.RangeRefresh,
		clock:    opt.Clock,
		epoch:    opt.Clock(),
		log:      opt.Logger,
		cache:    make(map[cacheKey]cachedBan),
		stop:     make(chan struct{}),
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

// contextTimeouts reports whether a go-redis client honours deadlines.
func contextTimeouts(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true // unknown implementations: assume the best, say nothing
}

// DialRedis parses a Redis URL (redis://, rediss://, unix://) and returns
// a store on a new client that it owns and closes on Close. The client
// honours context deadlines and does not retry: Config.StoreTimeout and the
// failure policy decide what a slow or dead Redis costs. It does not
// connect: the first command does.
func DialRedis(rawURL string, opt RedisOptions) (*RedisStore, error) {
	o, err := redisOptions(rawURL)
	if err != nil {
		return nil, fmt.Errorf("protect: %w", err)
	}
	s := NewRedisStore(redis.NewClient(o), opt)
	s.ownsConn = true
	return s, nil
}

// redisOptions parses a Redis URL into the client options the limiter
// needs. Its error quotes the URL with any password masked.
func redisOptions(rawURL string) (*redis.Options, error) {
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q: %w", redactURL(rawURL), cmp.Or(errors.Unwrap(err), err))
	}
	o.ContextTimeoutEnabled = true
	if o.MaxRetries == 0 {
		o.MaxRetries = -1
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = time.Second
	}
	return o, nil
}

var urlSecret = regexp.MustCompile(`//[^/@]*@`)

// redactURL hides the credentials of a URL quoted in an error.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	}
	return urlSecret.ReplaceAllString(raw, "//xxxxx@")
}

// Addr names the server the store talks to, for messages.
func (s *RedisStore) Addr() string {
	switch c := s.client.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	}
	return "redis"
}

// Ping checks that Redis answers; the error names the address.
func (s *RedisStore) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("protect: redis at %s does not answer: %w", s.Addr(), err)
	}
	return nil
}

// Client returns the go-redis client the store uses.
func (s *RedisStore) Client() redis.UniversalClient { return s.client }

// Close stops the refresher, and closes the client if DialRedis made it.
func (s *RedisStore) Close() error {
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

func (s *RedisStore) now() int64 { return int64(s.clock().Sub(s.epoch)) }

// redisKeys returns a key's three Redis keys, <ns>{<key>}:c, :b and :o,
// cut from one string: one allocation instead of five.
func redisKeys(ns string, k Key) (counter, ban, offenses string) {
	ks := k.String()
	n := len(ns) + len(ks) + 4 // ns { ks } :x
	var b strings.Builder
	b.Grow(3 * n)
	for _, suffix := range []string{"}:c", "}:b", "}:o"} {
		b.WriteString(ns)
		b.WriteByte('{')
		b.WriteString(ks)
		b.WriteString(suffix)
	}
	all := b.String()
	return all[:n], all[n : 2*n], all[2*n:]
}

// limitArgs returns the take script's arguments for lim, boxed once per
// distinct Limits rather than on every request.
func (s *RedisStore) limitArgs(lim *Limits) []any {
	if v, ok := s.args.Load(*lim); ok {
		return v.([]any)
	}
	args := []any{lim.TTL.Milliseconds(), lim.BanLimit, lim.BanDuration.Milliseconds(),
		lim.BanFactor, lim.MaxBanDuration.Milliseconds(), lim.OffenseWindow.Milliseconds()}
	v, _ := s.args.LoadOrStore(*lim, args)
	return v.([]any)
}

// Take implements Store: one round trip, or none when a range ban or a
// cached ban answers.
func (s *RedisStore) Take(ctx context.Context, ns string, k Key, addr netip.Addr, lim *Limits) (Result, error) {
	if k.IsZero() {
		return Result{}, errors.New("protect: redis store: take: empty key")
	}
	t := s.now()
	sp, err := s.space(ctx, ns)
	if err != nil {
		return Result{}, err
	}
	if r, banned := sp.ranges.Load().banned(addr, t); banned {
		r.Cached = true
		return r, nil
	}
	if r, ok := s.lookupBan(ns, k, t); ok {
		return r, nil
	}
	c, b, o := redisKeys(ns, k)
	v, err := s.take.Run(ctx, s.client, []string{c, b, o}, s.limitArgs(lim)...).Slice()
	if err != nil {
		return Result{}, fmt.Errorf("protect: redis take %s: %w", k, err)
	}
	r, err := parseTake(v, k)
	if err != nil {
		return Result{}, fmt.Errorf("protect: redis take %s: %w", k, err)
	}
	if r.Banned {
		s.remember(ns, k, r, t)
	}
	return r, nil
}

// parseTake reads the take script's reply.
func parseTake(v []any, k Key) (Result, error) {
	if len(v) == 1 {
		n, err := toInt(v[0])
		return Result{Count: n}, err
	}
	if len(v) != 11 {
		return Result{}, fmt.Errorf("unexpected reply of %d values", len(v))
	}
	var n [5]int64 // count, banned, new, left, created
	for i := range n {
		var err error
		if n[i], err = toInt(v[i]); err != nil {
			return Result{}, err
		}
	}
	b, err := banRecord(k, false, map[string]string{
		"created": str(v[4]), "expires": str(v[5]), "offense": str(v[6]),
		"reason": str(v[7]), "source": str(v[8]), "by": str(v[9]),
	})
	if err != nil {
		return Result{}, err
	}
	r := Result{Count: n[0], Banned: true, NewBan: n[2] == 1, Ban: &b}
	if !b.Permanent() {
		r.BanLeft = time.Duration(n[3]) * time.Millisecond
	}
	return r, nil
}

// banRecord builds a Ban from a ban hash's fields.
func banRecord(k Key, isRange bool, f map[string]string) (Ban, error) {
	created, err1 := strconv.ParseInt(f["created"], 10, 64)
	expires, err2 := strconv.ParseInt(f["expires"], 10, 64)
	offense, err3 := strconv.Atoi(cmp.Or(f["offense"], "0"))
	if err := errors.Join(err1, err2, err3); err != nil {
		return Ban{}, fmt.Errorf("malformed ban record: %w", err)
	}
	b := Ban{Key: k, Range: isRange, Reason: f["reason"], Source: Source(f["source"]), By: f["by"],
		Created: time.UnixMilli(created).UTC(), Offense: offense}
	if expires != 0 {
		b.Expires = time.UnixMilli(expires).UTC()
	}
	return b, nil
}

func toInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("unexpected %T in reply", v)
}

func str(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

// cached answers from the local ban cache.
func (s *RedisStore) lookupBan(ns string, k Key, t int64) (Result, bool) {
	if s.cached.Load() == 0 { // the common case: nothing banned here lately
		return Result{}, false
	}
	s.mu.Lock()
	c, ok := s.cache[cacheKey{ns, k}]
	s.mu.Unlock()
	if !ok || t >= c.until {
		return Result{}, false
	}
	r := Result{Banned: true, Cached: true, Ban: c.ban}
	if c.end != 0 {
		r.BanLeft = time.Duration(c.end - t)
	}
	return r, true
}

// remember caches a ban answer for at most BanCacheTTL, and never past
// the ban's end.
func (s *RedisStore) remember(ns string, k Key, r Result, t int64) {
	if s.cacheTTL < 0 {
		return
	}
	c := cachedBan{ban: r.Ban, until: t + int64(s.cacheTTL)}
	if !r.Ban.Permanent() {
		c.end = t + int64(r.BanLeft)
		c.until = min(c.until, c.end)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cache) >= s.maxCache {
		for key, old := range s.cache {
			if t >= old.until {
				delete(s.cache, key)
			}
		}
		if len(s.cache) >= s.maxCache {
			clear(s.cache) // every entry is younger than BanCacheTTL: drop them all
		}
	}
	s.cache[cacheKey{ns, k}] = c
	s.cached.Store(int64(len(s.cache)))
}

// forget drops a cached ban, after a lift or a new ban through this store.
func (s *RedisStore) forget(ns string, k Key) {
	s.mu.Lock()
	delete(s.cache, cacheKey{ns, k})
	s.cached.Store(int64(len(s.cache)))
	s.mu.Unlock()
}

// space returns a namespace's local state, loading its range bans on first
// use so that a fresh instance never serves a banned range.
func (s *RedisStore) space(ctx context.Context, ns string) (*redisSpace, error) {
	v, ok := s.spaces.Load(ns)
	if !ok {
		v, _ = s.spaces.LoadOrStore(ns, &redisSpace{})
	}
	sp := v.(*redisSpace)
	if sp.loaded.Load() {
		return sp, nil
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.loaded.Load() {
		return sp, nil
	}
	if err := s.loadRanges(ctx, ns, sp); err != nil {
		return nil, err
	}
	sp.loaded.Store(true)
	return sp, nil
}

func rangesKey(ns string) string { return ns + "ranges" }

// rangeCall runs the ranges script and decodes the records it returns.
func (s *RedisStore) rangeCall(ctx context.Context, ns string, args ...any) (now int64, bans []Ban, err error) {
	v, err := s.ranges.Run(ctx, s.client, []string{rangesKey(ns)}, args...).Slice()
	if err != nil {
		return 0, nil, fmt.Errorf("protect: redis range bans: %w", err)
	}
	if len(v) == 0 || len(v)%2 != 1 {
		return 0, nil, fmt.Errorf("protect: redis range bans: unexpected reply of %d values", len(v))
	}
	if now, err = toInt(v[0]); err != nil {
		return 0, nil, err
	}
	for i := 1; i+1 < len(v); i += 2 {
		b, err := parseRangeRecord(str(v[i]), str(v[i+1]))
		if err != nil {
			s.log.Warn("protect: skipping a malformed range ban", "range", str(v[i]), "error", err)
			continue
		}
		bans = append(bans, b)
	}
	return now, bans, nil
}

// parseRangeRecord reads "expires|created|source|by|reason".
func parseRangeRecord(field, rec string) (Ban, error) {
	p, err := netip.ParsePrefix(field)
	if err != nil {
		return Ban{}, err
	}
	parts := strings.SplitN(rec, "|", 5)
	if len(parts) != 5 {
		return Ban{}, fmt.Errorf("record %q: want 5 fields", rec)
	}
	return banRecord(Key{Prefix: p}, true, map[string]string{
		"expires": parts[0], "created": parts[1], "source": parts[2], "by": parts[3], "reason": parts[4],
	})
}

// loadRanges replaces sp's range bans with what Redis holds, converting
// Redis' expiry times into local ticks.
func (s *RedisStore) loadRanges(ctx context.Context, ns string, sp *redisSpace) error {
	now, bans, err := s.rangeCall(ctx, ns, "list")
	if err != nil {
		return err
	}
	t := s.now()
	list := make([]memBan, 0, len(bans))
	for _, b := range bans {
		mb := memBan{ban: b}
		if !b.Permanent() {
			mb.exp = t + int64(time.Duration(b.Expires.UnixMilli()-now)*time.Millisecond)
		}
		list = append(list, mb)
	}
	sp.ranges.Store(newRangeSnap(list))
	return nil
}

// refreshEvery re-reads the range bans of every namespace in use, logging
// one line when refreshing starts failing and one when it recovers.
func (s *RedisStore) refreshEvery(interval time.Duration) {
	defer s.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(interval, time.Second))
		err := s.refreshAll(ctx)
		cancel()
		if (err != nil) != failing {
			failing = err != nil
			if failing {
				s.log.Error("protect: cannot refresh range bans; keeping the last copy", "error", err)
			} else {
				s.log.Info("protect: range bans refreshed again")
			}
		}
	}
}

// reloadRanges re-reads ns's range bans after a change through this store,
// if this store serves ns. One that does not (protectctl, say) has no copy
// to bring up to date: its first Take in ns loads one.
func (s *RedisStore) reloadRanges(ctx context.Context, ns string) {
	if sp, ok := s.spaces.Load(ns); ok && sp.(*redisSpace).loaded.Load() {
		s.loadRanges(ctx, ns, sp.(*redisSpace))
	}
}

// Refresh re-reads the range bans of every namespace in use now, rather
// than at the next RangeRefresh tick.
func (s *RedisStore) Refresh(ctx context.Context) error { return s.refreshAll(ctx) }

// refreshAll re-reads the range bans of every namespace in use.
func (s *RedisStore) refreshAll(ctx context.Context) error {
	var errs []error
	s.spaces.Range(func(ns, sp any) bool {
		if err := s.loadRanges(ctx, ns.(string), sp.(*redisSpace)); err != nil {
			errs = append(errs, err)
		}
		return true
	})
	return errors.Join(errs...)
}

// AddBan implements Store.
func (s *RedisStore) AddBan(ctx context.Context, ns string, b Ban, length time.Duration) (Ban, error) {
	if b.Key.IsZero() || (b.Range && !b.Key.Prefix.IsValid()) {
		return Ban{}, errors.New("protect: redis store: ban: empty key")
	}
	if strings.ContainsAny(b.By, "|") {
		b.By = strings.ReplaceAll(b.By, "|", "/")
	}
	if b.Range {
		_, bans, err := s.rangeCall(ctx, ns, "add", b.Key.String(), length.Milliseconds(), string(b.Source), b.By, b.Reason)
		if err != nil {
			return Ban{}, err
		}
		if len(bans) != 1 {
			return Ban{}, errors.New("protect: redis range ban: no record returned")
		}
		s.reloadRanges(ctx, ns) // this instance sees it at once
		return bans[0], nil
	}
	c, key, _ := redisKeys(ns, b.Key)
	v, err := s.ban.Run(ctx, s.client, []string{c, key}, b.Key.String(), b.Reason, string(b.Source), b.By, length.Milliseconds()).Int64Slice()
	if err != nil || len(v) != 2 {
		return Ban{}, fmt.Errorf("protect: redis ban %s: %w", b.Key, errors.Join(err, errors.New("unexpected reply")))
	}
	s.forget(ns, b.Key)
	b.Created, b.Expires = time.UnixMilli(v[0]).UTC(), time.Time{}
	if v[1] != 0 {
		b.Expires = time.UnixMilli(v[1]).UTC()
	}
	b.Offense = 0
	return b, nil
}

// Lift implements Store.
func (s *RedisStore) Lift(ctx context.Context, ns string, k Key) (Ban, bool, error) {
	s.forget(ns, k)
	var lifted Ban
	found := false
	if k.Prefix.IsValid() {
		_, bans, err := s.rangeCall(ctx, ns, "lift", k.String())
		if err != nil {
			return Ban{}, false, err
		}
		if len(bans) > 0 {
			lifted, found = bans[0], true
			s.reloadRanges(ctx, ns)
		}
	}
	_, b, _ := redisKeys(ns, k)
	v, err := s.lift.Run(ctx, s.client, []string{b}).StringSlice()
	if err != nil {
		return Ban{}, false, fmt.Errorf("protect: redis lift %s: %w", k, err)
	}
	if len(v) > 0 {
		rec, err := banRecord(k, false, pairs(v))
		if err != nil {
			return Ban{}, false, fmt.Errorf("protect: redis lift %s: %w", k, err)
		}
		lifted, found = rec, true
	}
	return lifted, found, nil
}

func pairs(v []string) map[string]string {
	m := make(map[string]string, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		m[v[i]] = v[i+1]
	}
	return m
}

// RangeBans implements Store: one read of the namespace's ranges hash.
func (s *RedisStore) RangeBans(ctx context.Context, ns string) ([]Ban, error) {
	_, bans, err := s.rangeCall(ctx, ns, "list")
	return bans, err
}

// Bans implements Store: it scans every master for ban records.
func (s *RedisStore) Bans(ctx context.Context, ns string) ([]Ban, error) {
	out, err := s.RangeBans(ctx, ns)
	if err != nil {
		return nil, err
	}
	pattern := globEscape(ns) + "{*}:b"
	var mu sync.Mutex
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var keys []string
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		for _, key := range keys {
			f, err := c.HGetAll(ctx, key).Result()
			if err != nil {
				return err
			}
			if len(f) == 0 {
				continue // expired between SCAN and HGETALL
			}
			k, err := keyFromRedis(ns, key, f["key"])
			if err != nil {
				s.log.Warn("protect: skipping a ban record", "key", key, "error", err)
				continue
			}
			b, err := banRecord(k, false, f)
			if err != nil {
				s.log.Warn("protect: skipping a ban record", "key", key, "error", err)
				continue
			}
			mu.Lock()
			out = append(out, b)
			mu.Unlock()
		}
		return nil
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	default:
		err = scan(ctx, s.client)
	}
	if err != nil {
		return nil, fmt.Errorf("protect: redis list bans: %w", err)
	}
	return out, nil
}

// keyFromRedis recovers a Key from a ban's "key" field, or from its Redis
// key name when the field is missing.
func keyFromRedis(ns, redisKey, field string) (Key, error) {
	if field == "" {
		field = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(redisKey, ns), "{"), "}:b")
	}
	return ParseKey(field)
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

// Inspect implements Store.
func (s *RedisStore) Inspect(ctx context.Context, ns string, k Key, lim *Limits) (KeyState, error) {
	c, b, o := redisKeys(ns, k)
	v, err := s.inspect.Run(ctx, s.client, []string{c, b, o}, lim.OffenseWindow.Milliseconds()).Slice()
	if err != nil {
		return KeyState{}, fmt.Errorf("protect: redis inspect %s: %w", k, err)
	}
	if len(v) < 4 {
		return KeyState{}, fmt.Errorf("protect: redis inspect %s: unexpected reply", k)
	}
	var n [4]int64
	for i := range n {
		if n[i], err = toInt(v[i]); err != nil {
			return KeyState{}, err
		}
	}
	st := KeyState{Key: k, Count: n[0], Offenses: int(n[2])}
	if n[1] > 0 {
		st.CountTTL = time.Duration(n[1]) * time.Millisecond
	}
	if len(v) > 4 {
		f := make(map[string]string)
		for i := 4; i+1 < len(v); i += 2 {
			f[str(v[i])] = str(v[i+1])
		}
		rec, err := banRecord(k, false, f)
		if err != nil {
			return KeyState{}, err
		}
		st.Ban = &rec
	} else if k.Prefix.IsValid() {
		_, bans, err := s.rangeCall(ctx, ns, "get", k.String())
		if err != nil {
			return KeyState{}, err
		}
		if len(bans) > 0 {
			st.Ban = &bans[0]
		}
	}
	return st, nil
}
