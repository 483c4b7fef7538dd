package protect

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"
)

// A Protector decides, request by request, whether a client may pass. It
// is safe for concurrent use. The zero value is not usable: make one with
// New, and Close it when done.
type Protector struct {
	cfg      Config // as New completed it
	store    Store
	mem      *MemoryStore // store, when it is one: called directly on the hot path
	memSpace *space       // the namespace in mem, looked up once
	ownStore bool
	local    *MemoryStore // FailLocal's per-process fallback; nil otherwise
	deadline bool         // whether store calls need StoreTimeout
	timeout  time.Duration
	onError  FailurePolicy
	brk      breaker
	clock    func() time.Time

	ns  string
	lim Limits
	max int64
	hdr *headerValues

	res     resolver
	safe    netList
	agg     aggregator
	keyFunc func(*http.Request) (string, bool)
	names   nameCache

	dryRun        bool
	banStatus     int
	unknownStatus int
	log           *slog.Logger

	closeOnce sync.Once
	closeErr  error
}

// New checks cfg, fills in its defaults and returns a Protector. A bad
// setting is an error that names it and quotes the value; New never
// panics on configuration.
func New(cfg Config) (*Protector, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	trusted, err := parseNetList("TrustedProxies", c.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	safe, err := parseNetList("SafeNetworks", c.SafeNetworks)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	header := canonicalHeader(c.ProxyHeader)
	p := &Protector{
		cfg:     c,
		store:   c.Store,
		timeout: c.StoreTimeout,
		onError: c.OnStoreError,
		clock:   c.Clock,
		ns:      c.Namespace,
		lim: Limits{
			TTL:            c.TTL,
			BanLimit:       c.BanLimit,
			BanDuration:    c.BanDuration,
			BanFactor:      c.BanFactor,
			MaxBanDuration: c.MaxBanDuration,
			OffenseWindow:  c.OffenseWindow,
		},
		max:           c.MaxRequests,
		hdr:           newHeaderValues(c.MaxRequests, c.TTL),
		res:           resolver{trusted: trusted, header: header, kind: kindOf(header), count: c.ProxyCount, trustUnix: c.TrustUnixSocket},
		safe:          safe,
		agg:           aggregator{v4Bits: c.IPv4Prefix, v6Bits: c.IPv6Prefix},
		keyFunc:       c.KeyFunc,
		dryRun:        c.DryRun,
		banStatus:     c.BanStatus,
		unknownStatus: c.UnknownStatus,
		log:           c.Logger,
	}
	if p.store == nil && c.RedisURL != "" {
		o, err := redisOptions(c.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("%w: RedisURL: %w", ErrConfig, err)
		}
		rs := NewRedisStore(redis.NewClient(o), RedisOptions{Logger: c.Logger})
		rs.ownsConn = true
		p.store, p.ownStore = rs, true
	}
	if p.store == nil {
		p.store, p.ownStore = NewMemoryStore(MemoryOptions{Clock: cfg.Clock}), true
	}
	// A memory store answers from this process's memory: it cannot hang,
	// so its calls skip the deadline (and the allocations a deadline costs).
	mem, inMemory := p.store.(*MemoryStore)
	p.mem, p.deadline = mem, !inMemory
	if inMemory {
		p.memSpace = mem.space(p.ns)
	}
	if !inMemory && p.onError == FailLocal {
		p.local = NewMemoryStore(MemoryOptions{Clock: cfg.Clock})
	}
	return p, nil
}

// Close releases what the protector owns: the store it made (not one
// passed in Config.Store) and its local fallback store. It is safe to call
// more than once.
func (p *Protector) Close() error {
	p.closeOnce.Do(func() {
		if p.local != nil {
			p.local.Close()
		}
		if p.ownStore {
			p.closeErr = p.store.Close()
		}
	})
	return p.closeErr
}

// Store returns the protector's store.
func (p *Protector) Store() Store { return p.store }

// Config returns the configuration in force: the one given to New with
// every default filled in. Store is the store in use.
func (p *Protector) Config() Config {
	c := p.cfg
	c.Store = p.store
	return c
}

// ResolveClient returns the client address of r as Verify sees it, or an
// error wrapping ErrUnknownClient. It counts nothing.
func (p *Protector) ResolveClient(r *http.Request) (netip.Addr, error) {
	return p.res.resolve(r)
}

// IsSafe reports whether a is in SafeNetworks.
func (p *Protector) IsSafe(a netip.Addr) bool {
	a, ok := normalize(a)
	return ok && p.safe.contains(a)
}

// KeyFor returns the key Verify counts address a under: its /IPv4Prefix
// or /IPv6Prefix.
func (p *Protector) KeyFor(a netip.Addr) Key {
	a, _ = normalize(a)
	return p.agg.key(a)
}

// Inspect reports the state of k in the protector's namespace without
// changing anything.
func (p *Protector) Inspect(ctx context.Context, k Key) (KeyState, error) {
	ctx, cancel := p.storeContext(ctx)
	defer cancel()
	st, err := p.store.Inspect(ctx, p.ns, k, &p.lim)
	if err != nil {
		return KeyState{}, fmt.Errorf("protect: inspect %s: %w", k, err)
	}
	return st, nil
}

// Namespace returns the namespace the protector writes under.
func (p *Protector) Namespace() string { return p.ns }

// Limits returns the limits the protector passes to its store.
func (p *Protector) Limits() Limits { return p.lim }

// Verify decides one request: it resolves the client behind trusted
// proxies, then runs the pipeline (unknown address → safe networks →
// block list → ban threshold → stream limit) and counts the request.
// Call it once per request: each call counts.
//
// The Decision is always complete: when the store fails it follows
// OnStoreError and the error is in Decision.Err. The error result is
// non-nil only when ctx ended before the store answered; the decision is
// then Unavailable.
func (p *Protector) Verify(ctx context.Context, r *http.Request) (Decision, error) {
	addr, err := p.res.resolve(r)
	if err != nil {
		return p.unknown(err), nil
	}
	if p.keyFunc != nil {
		if id, ok := p.keyFunc(r); ok && id != "" {
			if p.safe.contains(addr) {
				return Decision{Status: Safe, Addr: addr}, nil
			}
			k := ConsumerKey(id)
			return p.decide(ctx, k, k.Name, addr)
		}
	}
	return p.VerifyAddr(ctx, addr)
}

// VerifyAddr decides a request from an address you resolved yourself. The
// address is normalised (unmapped, zone dropped) before anything else; an
// invalid or unspecified address is Unknown.
func (p *Protector) VerifyAddr(ctx context.Context, addr netip.Addr) (Decision, error) {
	a, ok := normalize(addr)
	if !ok {
		return p.unknown(errUnspecified), nil
	}
	if p.safe.contains(a) {
		return Decision{Status: Safe, Addr: a}, nil
	}
	w := p.agg.words(a)
	ks := p.names.get(w)
	if p.mem != nil {
		return p.conclude(ctx, Key{}, ks, a, p.mem.takeWords(p.memSpace, w, a, &p.lim), nil)
	}
	k := Key{Prefix: w.prefix()}
	res, err := p.take(ctx, k, a)
	return p.conclude(ctx, k, ks, a, res, err)
}

// VerifyKey decides a request of a resolved consumer, after
// authentication: the consumer is counted, not the address. See
// ConsumerKey for how the key is stored. An empty key is Unknown.
func (p *Protector) VerifyKey(ctx context.Context, key string) (Decision, error) {
	if key == "" {
		return p.unknown(fmt.Errorf("%w: empty consumer key", ErrUnknownClient)), nil
	}
	k := ConsumerKey(key)
	return p.decide(ctx, k, k.Name, netip.Addr{})
}

// Middleware returns a handler that verifies every request before next
// sees it, on every path of next, 404s included. A refused request gets
// the decision's problem+json response; an allowed one carries the
// RateLimit fields.
func (p *Protector) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := p.Verify(r.Context(), r)
		if d.Refused() {
			d.WriteResponse(w)
			return
		}
		d.WriteHeaders(w.Header())
		next.ServeHTTP(w, r)
	})
}

func (p *Protector) unknown(err error) Decision {
	d := Decision{Status: Unknown, Err: err, DryRun: p.dryRun, code: p.unknownStatus}
	p.logDryRun(d)
	return d
}

// decide runs steps 3–5 for key k through the store and the failure
// policy.
func (p *Protector) decide(ctx context.Context, k Key, ks string, a netip.Addr) (Decision, error) {
	res, err := p.take(ctx, k, a)
	return p.conclude(ctx, k, ks, a, res, err)
}

// conclude turns the store's answer for key k (written ks) into a
// Decision, applying the failure policy when the store failed.
func (p *Protector) conclude(ctx context.Context, k Key, ks string, a netip.Addr, res Result, err error) (Decision, error) {
	d := Decision{Addr: a, Key: ks, Limit: p.max, Window: p.lim.TTL, DryRun: p.dryRun, hdr: p.hdr}
	if err != nil {
		if ctx.Err() != nil {
			d.Status, d.Err, d.hdr = Unavailable, err, nil
			return d, ctx.Err()
		}
		d.Err = err
		switch p.onError {
		case FailOpen:
			d.hdr = nil
			return d, nil
		case FailClosed:
			d.Status, d.RetryAfter, d.hdr = Unavailable, breakerCooldown, nil
			p.logDryRun(d)
			return d, nil
		}
		res, _ = p.local.Take(ctx, p.ns, k, a, &p.lim)
	}
	d.Count = res.Count
	d.Remaining = max(p.max-res.Count, 0)
	switch {
	case res.Banned:
		d.Status, d.code, d.Remaining = Banned, p.banStatus, 0
		d.RetryAfter, d.BanExpires = res.BanLeft, res.Ban.Expires
		if res.NewBan {
			p.logBan(ctx, "protect: ban added", *res.Ban)
		}
	case res.Count > p.max:
		d.Status, d.RetryAfter = Limited, p.lim.TTL
	}
	if p.dryRun {
		p.logDryRun(d)
	}
	return d, nil
}

// take calls the store with a deadline, through the circuit breaker.
func (p *Protector) take(ctx context.Context, k Key, a netip.Addr) (Result, error) {
	if p.mem != nil {
		return p.mem.Take(ctx, p.ns, k, a, &p.lim)
	}
	now := p.clock()
	if !p.brk.allow(now) {
		return Result{}, ErrStoreUnavailable
	}
	sctx, cancel := context.WithTimeout(ctx, p.timeout)
	res, err := p.store.Take(sctx, p.ns, k, a, &p.lim)
	cancel()
	if err == nil {
		if p.brk.success() {
			p.log.LogAttrs(ctx, slog.LevelInfo, "protect: store recovered", slog.String("namespace", p.ns))
		}
		return res, nil
	}
	if ctx.Err() != nil {
		// The caller gave up; that says nothing about the store.
		p.brk.release()
		return Result{}, ctx.Err()
	}
	if p.brk.failure(p.clock()) {
		p.log.LogAttrs(ctx, slog.LevelError, "protect: store failing; circuit open",
			slog.String("namespace", p.ns), slog.String("policy", p.onError.String()), slog.Any("error", err))
	}
	return Result{}, err
}

// storeContext bounds an administrative store call by StoreTimeout.
func (p *Protector) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if !p.deadline {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, p.timeout)
}

// logDryRun logs the refusals a dry run lets through.
func (p *Protector) logDryRun(d Decision) {
	if !p.dryRun || d.Status < Limited {
		return
	}
	p.log.LogAttrs(context.Background(), slog.LevelInfo, "protect: dry run: would refuse",
		slog.String("status", d.Status.String()), slog.String("key", d.Key),
		slog.String("addr", addrString(d.Addr)), slog.Int64("count", d.Count))
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// nameCache remembers how recent address keys are written, so that the
// hot path does not format (and allocate) the same key on every request.
// It is direct-mapped and lock-free: a collision just formats again.
type nameCache struct {
	slots [1024]atomic.Pointer[cachedName]
}

// cachedName holds a key and its text in one allocation: the string
// returned points into buf, which is never written after the entry is
// published. A miss (every request, with a million keys in rotation) thus
// costs one allocation instead of two.
type cachedName struct {
	w   wordKey
	n   uint8
	buf [47]byte // "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128" is 43
}

func (c *nameCache) get(w wordKey) string {
	h := (w.hi*0x9e3779b97f4a7c15 ^ w.lo ^ w.bits) * 0xff51afd7ed558ccd
	slot := &c.slots[h>>54] // the top 10 bits: 1024 slots
	if e := slot.Load(); e != nil && e.w == w {
		return unsafe.String(&e.buf[0], e.n)
	}
	e := &cachedName{w: w}
	p := w.prefix()
	b := p.Addr().AppendTo(e.buf[:0])
	if !p.IsSingleIP() {
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(p.Bits()), 10)
	}
	e.n = uint8(len(b))
	slot.Store(e)
	return unsafe.String(&e.buf[0], e.n)
}
