package protect

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"sync"

	"github.com/httpprotect/protect/blocklist"
	"github.com/httpprotect/protect/internal/clientaddr"
	"github.com/httpprotect/protect/memstore"
	"github.com/httpprotect/protect/store"
)

// A Protector decides, request by request, whether a client may pass. It
// is safe for concurrent use. The zero value is not usable: make one with
// New, and Close it when done.
type Protector struct {
	cfg   Config // as New completed it
	store Store
	raw   store.Space // the store, bound to the namespace and the limits
	space store.Space // raw, or raw behind the guard when it is outside this process
	guard *guard      // the outage machinery around a space outside this process (guard.go); nil for a local one
	owned bool        // New made the store: Close closes it
	stats stats       // Stats' counters (stats.go)

	lim        store.Limits  // what the space decides by
	hdr        *headerValues // the RateLimit fields' parts that never change
	planFields planFields    // and the plans'

	res          clientaddr.Resolver
	safe         clientaddr.NetList
	screens      bool // SafeNetworks or BlockLists: screened has work to do
	agg          clientaddr.Aggregator
	consumerKeys store.KeyCache // the cache of hashed consumer keys (consumer.go)

	esc *escalation // prefix escalation (escalate.go); nil when off

	lists *blocklist.Lists // Config.BlockLists; nil when none

	chal *challenger // Config.Challenge (challenge.go); nil when off

	closeOnce sync.Once
	closeErr  error
}

// New checks cfg, fills in its defaults and returns a Protector. A bad
// setting is an error that names it and quotes the value; New never
// panics on configuration.
//
// Every protector of a service is given the same Config.Store: that is
// how they share one pool of connections, one circuit breaker and one
// ban list. A protector with no Store makes a MemoryStore of its own,
// which Close closes.
func New(cfg Config) (*Protector, error) {
	cc, err := cfg.checked()
	if err != nil {
		return nil, err
	}
	c, trusted, safe := cc.Config.cloneLists(), cc.trusted, cc.safe
	p := &Protector{
		cfg:   c,
		store: c.Store,
		lim: store.Limits{
			MaxRequests:    c.MaxRequests,
			TTL:            c.TTL,
			BanLimit:       c.BanLimit,
			BanDuration:    c.BanDuration,
			BanFactor:      c.BanFactor,
			MaxBanDuration: c.MaxBanDuration,
			OffenseWindow:  c.OffenseWindow,
		},
		hdr:        newHeaderValues(c.Name, c.MaxRequests, c.TTL),
		planFields: planFields{seed: maphash.MakeSeed()},
		res:        clientaddr.NewResolver(trusted, c.ProxyHeader, c.ProxyCount, c.TrustUnixSocket),
		safe:       safe,
		agg:        clientaddr.Aggregator{V4Bits: c.IPv4Prefix, V6Bits: c.IPv6Prefix},
		stats:      newStats(),
	}
	if c.CountStatus != nil {
		// This protector counts nothing but failures; its bans say so,
		// in protectctl's list and in the log.
		p.lim.BanReason = failuresReason(c.BanLimit)
	}
	if p.store == nil {
		p.store, p.owned = memstore.New(memstore.Options{Clock: cfg.Clock}), true
	}
	scope := store.Scope{Namespace: p.cfg.Namespace, BanNamespace: c.BanNamespace, Limits: p.lim}
	if p.cfg.DryRun {
		// A dry run writes no ban: its bans would be enforced by every
		// live protector on the ban list. It decides "would ban" itself,
		// from p.lim (see wouldBan).
		scope.Limits.BanLimit = -1
	}
	if p.raw, err = p.store.Space(scope); err != nil {
		p.closeOwned()
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	p.space = p.guardSpace(p.raw, scope, true)
	if p.esc, err = p.newEscalation(); err != nil {
		p.closeOwned()
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if p.lists, err = blocklist.Open(c.BlockLists, c.Clock, c.Logger); err != nil {
		p.Close()
		return nil, configErr("BlockLists%w", err)
	}
	if p.chal, err = newChallenger(&p.cfg); err != nil {
		p.Close()
		return nil, configErr("Challenge: %w", err)
	}
	p.screens = !p.safe.Empty() || p.lists != nil
	if p.guard == nil && !p.cfg.DryRun {
		p.publish() // in process: at once, it costs nothing
	}
	return p, nil
}

// closeOwned closes the store New made, if it made one.
func (p *Protector) closeOwned() error {
	if p.owned {
		return p.store.Close()
	}
	return nil
}

// Close releases what the protector owns: the store it made (not one
// passed in Config.Store, which whoever made it closes, after the
// protectors on it) and its local fallback store. It is safe to call
// more than once.
func (p *Protector) Close() error {
	p.closeOnce.Do(func() {
		if p.guard != nil {
			p.guard.close()
		}
		p.lists.Close()
		p.closeErr = p.closeOwned()
	})
	return p.closeErr
}

// Config returns the configuration in force: the one given to New with
// every default filled in. Store is the store in use.
func (p *Protector) Config() Config {
	c := p.cfg.cloneLists()
	c.Store = p.store
	return c
}

// Space returns the store space the protector reads and writes: its
// Store bound to its Namespace, BanNamespace and limits, with every
// optional capability the store gives it (store.BanPager, store.Journal,
// ...). It is the store's own, not behind the guard: a call through it
// has no deadline but its context's and no breaker, so give each one a
// deadline (StoreTimeout), as package admin does. What is written through
// it bypasses the protector's Stats and log: ban and lift with Ban and
// Lift.
func (p *Protector) Space() store.Space { return p.raw }

// cloneLists returns c with slices of its own: a protector keeps the
// lists it was made with, whatever its caller later does with theirs,
// and hands out copies, so that what Config reports is what it decides
// by (package admin resolves clients from it).
func (c Config) cloneLists() Config {
	c.TrustedProxies = slices.Clone(c.TrustedProxies)
	c.SafeNetworks = slices.Clone(c.SafeNetworks)
	c.IPv4Escalation = slices.Clone(c.IPv4Escalation)
	c.IPv6Escalation = slices.Clone(c.IPv6Escalation)
	c.BlockLists = slices.Clone(c.BlockLists)
	if c.Challenge != nil {
		cc := *c.Challenge
		cc.Secret = slices.Clone(cc.Secret)
		c.Challenge = &cc
	}
	return c
}

// IsSafe reports whether a is in SafeNetworks.
func (p *Protector) IsSafe(a netip.Addr) bool {
	a, ok := clientaddr.Normalize(a)
	return ok && p.safe.Contains(a)
}

// FromTrustedProxy reports whether r's connecting peer is one whose
// headers Verify believes: a peer in TrustedProxies, a unix socket with
// TrustUnixSocket, or any peer under ProxyCount when TrustedProxies is
// empty. A program that reads other headers its proxy writes (protectd's
// X-Protect-Consumer) should believe them only when this is true, for the
// reason Verify ignores an untrusted peer's X-Forwarded-For: a client that
// connects directly can write any header.
func (p *Protector) FromTrustedProxy(r *http.Request) bool { return p.res.Trusts(r) }

// Verify decides one request: it resolves the client behind trusted
// proxies, then runs the pipeline (unknown address → safe networks →
// block list → ban threshold → stream limit) and counts the request.
// Call it once per request: each call counts.
//
// The Decision is always complete: when the store fails it follows
// OnStoreError and the error is in Decision.Err. The error result is
// non-nil only when ctx ended before the store answered; the decision is
// then Unavailable.
//
// With Config.Challenge, a Challenged client that sends a valid pass
// cookie is Allowed; a genuine pass of another client counts one failure.
func (p *Protector) Verify(ctx context.Context, r *http.Request) (d Decision, err error) {
	defer p.decided(&d)
	d, err = p.request(ctx, r, 1)
	if d.Status == Challenged {
		p.passed(ctx, r, &d)
	}
	return d, err
}

// Check decides r as Verify does, through the same pipeline and the same
// store operation, but counts nothing and writes nothing. It is Banned
// while a ban holds, Limited when the client has nothing left (the stream
// has reached MaxRequests: Remaining is 0, so its next request would be
// refused; under a plan, one more request would not fit), and otherwise
// Allowed, with Count the stream's count so far. It never predicts a ban:
// a client one request short of BanLimit is Limited, or Allowed.
//
// Past Config.Challenge.After it is Challenged, or Allowed with a valid
// pass cookie, as Verify is.
func (p *Protector) Check(ctx context.Context, r *http.Request) (d Decision, err error) {
	defer p.decided(&d)
	d, err = p.request(ctx, r, 0)
	if d.Status == Challenged {
		p.passed(ctx, r, &d)
	}
	return d, err
}

// request runs the pipeline for r, counting n.
func (p *Protector) request(ctx context.Context, r *http.Request, n int64) (d Decision, err error) {
	a, err := p.res.Resolve(r)
	if p.screened(&d, a, err) {
		return d, nil
	}
	if d.Ban != nil { // on a list marked to challenge (listChallenged)
		return p.listedRequest(ctx, r, a, n, d.Ban)
	}
	if p.cfg.ConsumerFunc != nil || p.cfg.KeyFunc != nil {
		return p.consumerRequest(ctx, r, a, n)
	}
	err = p.decide(ctx, &d, p.agg.Key(a), a, n)
	return d, err
}

// screened runs steps 1 to 3 for the client address a, which resolving
// it (or normalising it) gave with err: unknown address, safe networks,
// Config.BlockLists. It reports whether one of them decided d. A listed
// address is Blocked before the store is asked anything, so a listed
// flood costs the store nothing.
func (p *Protector) screened(d *Decision, a netip.Addr, err error) bool {
	if err == nil && !p.screens { // the common case, inlined
		return false
	}
	return p.screen(d, a, err)
}

// screen is screened past its inlined test.
func (p *Protector) screen(d *Decision, a netip.Addr, err error) bool {
	if (err != nil || !p.safe.Empty()) && p.safeOrUnknown(d, a, err) {
		return true
	}
	var hit blocklist.Hit
	if p.lists.Find(a, &hit) {
		// An operator's allowlist entry passes a listed address, as a
		// safe network does: the store's answer would, after the list.
		if p.allowedHere(a) {
			d.Status, d.Addr = Safe, a
			return true
		}
		if hit.Challenge && p.chal != nil {
			// Counted as any client is; decide leaves Challenged in
			// place of Allowed, and Verify lets a pass through.
			p.listChallenged(d, &hit)
			return false
		}
		p.blocked(d, a, &hit)
		return true
	}
	return false
}

// safeOrUnknown decides d when a is safe or err explains why there is
// no address, out of the path of a request that is neither.
//
//go:noinline
func (p *Protector) safeOrUnknown(d *Decision, a netip.Addr, err error) bool {
	switch {
	case a.IsValid() && p.safe.Contains(a):
		d.Status, d.Addr = Safe, a
	case err != nil:
		*d = p.unknown(err)
	default:
		return false
	}
	return true
}

// consumerRequest decides r from the address a, which steps 1 and 2
// passed, when ConsumerFunc or KeyFunc may name what counts instead of
// the address.
//
//go:noinline
func (p *Protector) consumerRequest(ctx context.Context, r *http.Request, a netip.Addr, n int64) (d Decision, err error) {
	if f := p.cfg.ConsumerFunc; f != nil {
		if id, plan, ok := f(r); ok && id != "" {
			if d, banned := p.addressBanned(ctx, a); banned {
				return d, nil
			}
			return p.consumer(ctx, id, plan, a, n)
		}
	}
	k := p.agg.Key(a)
	if f := p.cfg.KeyFunc; f != nil {
		if id, ok := f(r); ok && id != "" {
			if d, banned := p.addressBanned(ctx, a); banned {
				return d, nil
			}
			k = p.consumerKeys.Key(id)
		}
	}
	err = p.decide(ctx, &d, k, a, n)
	return d, err
}

// addressBanned checks the ban on the counting key of addr, for a request
// that counts a consumer instead. A ban on an address holds for every
// request from it, whatever is counted: otherwise a banned scanner that
// gets hold of any API key (a free trial, say) would walk past its ban.
// Range bans are checked with the consumer's key, in the same step. On
// Redis this is one more round trip, answered locally once this instance
// has seen the ban. It asks the store for the ban alone: not the plan of
// Config.Plan, and not the failure policy, which the consumer's own
// decision applies once (a store error here is "not banned").
func (p *Protector) addressBanned(ctx context.Context, addr netip.Addr) (d Decision, banned bool) {
	k := p.agg.Key(addr)
	res, err := p.space.Take(ctx, k, addr, 0)
	if err != nil || !res.Banned() {
		return Decision{}, false
	}
	d = Decision{Addr: addr, Key: k, Limit: p.cfg.MaxRequests, Window: p.lim.TTL, DryRun: p.cfg.DryRun, hdr: p.hdr}
	p.banned(ctx, &d, &res)
	if p.cfg.DryRun {
		p.logDryRun(&d)
		return Decision{}, false // a dry run only logs: the consumer is decided as usual
	}
	return d, true
}

// VerifyAddr decides a request from an address you resolved yourself. The
// address is normalised (unmapped, zone dropped) before anything else; an
// invalid or unspecified address is Unknown.
func (p *Protector) VerifyAddr(ctx context.Context, addr netip.Addr) (d Decision, err error) {
	// Each return counts the decision itself: a defer costs the hot path
	// more than the count.
	a, ok := clientaddr.Normalize(addr)
	if !ok {
		a, err = netip.Addr{}, clientaddr.ErrUnspecified
	}
	if p.screened(&d, a, err) {
		p.decided(&d)
		return d, nil
	}
	if d.Ban != nil { // on a list marked to challenge (listChallenged)
		return p.listedAddr(ctx, a, d.Ban)
	}
	err = p.decide(ctx, &d, p.agg.Key(a), a, 1)
	p.decided(&d)
	return d, err
}

// VerifyKey decides a request of a resolved consumer, after
// authentication: the consumer is counted, not the address. See
// ConsumerKey for how the key is stored. An empty key is Unknown.
func (p *Protector) VerifyKey(ctx context.Context, key string) (d Decision, err error) {
	defer p.decided(&d)
	if key == "" {
		return p.unknown(fmt.Errorf("%w: empty consumer key", ErrUnknownClient)), nil
	}
	err = p.decide(ctx, &d, p.consumerKeys.Key(key), netip.Addr{}, 1)
	return d, err
}

func (p *Protector) unknown(err error) Decision {
	d := Decision{Status: Unknown, Err: err, DryRun: p.cfg.DryRun, code: uint16(p.cfg.UnknownStatus)}
	p.logDryRun(&d)
	return d
}

// decide runs steps 3–5 for the key k of the address a, counting n: it
// asks the store (take), or the failure policy when the store fails, and
// writes the answer into d, which holds nothing yet: one Decision, in
// its caller's frame, rather than one copied through every call. The
// error is non-nil only when ctx ended.
func (p *Protector) decide(ctx context.Context, d *Decision, k Key, a netip.Addr, n int64) error {
	if p.cfg.Plan != nil { // Config.Plan in place of MaxRequests (consumer.go)
		return p.decidePlan(ctx, d, k, a, p.cfg.Plan, n, true)
	}
	res, err := p.space.Take(ctx, k, a, n)
	d.Addr, d.Key = a, k
	if err != nil {
		return p.takeFailed(ctx, d, n, err)
	}
	if res.Ban == nil && res.Count < p.cfg.MaxRequests && !p.cfg.DryRun && !res.Allowed { // allowed, with room: streamDecision's common case
		d.Limit, d.Window, d.hdr = p.cfg.MaxRequests, p.lim.TTL, p.hdr
		d.Count, d.Remaining = res.Count, p.cfg.MaxRequests-res.Count
		return nil
	}
	p.streamDecision(ctx, d, n, &res)
	return nil
}

// streamDecision writes into d, whose Addr and Key are set, the answer
// res that the store, or the FailLocal store, gave for counting n: the
// one place a stream's Decision is made.
func (p *Protector) streamDecision(ctx context.Context, d *Decision, n int64, res *store.Result) {
	if res.Allowed {
		d.Status = Safe
		return
	}
	d.Limit, d.Window, d.DryRun, d.hdr = p.cfg.MaxRequests, p.lim.TTL, p.cfg.DryRun, p.hdr
	d.Count = res.Count
	d.Remaining = max(p.cfg.MaxRequests-res.Count, 0)
	switch {
	case res.Banned():
		d.Remaining = 0
		p.banned(ctx, d, res)
	case p.cfg.DryRun && p.lim.BanLimit >= 0 && res.Count > p.lim.BanLimit:
		p.wouldBan(ctx, d, n)
	case p.chal != nil && res.Count > p.chal.after:
		// Past the limit and short of the ban: prove it is a browser.
		// Verify lets a pass through (passed).
		d.Status, d.Remaining = Challenged, 0
	case res.Count > p.cfg.MaxRequests, n == 0 && res.Count >= p.cfg.MaxRequests:
		// Counted, the stream is past the limit; checked, it has nothing
		// left (Remaining 0), so its next request would be.
		d.Status, d.RetryAfter = Limited, p.lim.TTL
	}
	if p.cfg.DryRun && n > 0 { // a Check refuses nothing it could log
		p.logDryRun(d)
	}
}

// wouldBan decides, in a dry run, a stream whose count d.Count is past
// BanLimit: Banned, as a live protector would answer, with no ban
// written (the store's scope has no BanLimit). The crossing request logs
// "would ban" once; the ones after it are logged as refusals, as the
// banned client's would be. The length is BanDuration's: a dry run keeps
// no offense history to escalate.
//
//go:noinline
func (p *Protector) wouldBan(ctx context.Context, d *Decision, n int64) {
	d.Status, d.code, d.Remaining, d.RetryAfter = Banned, uint16(p.cfg.BanStatus), 0, p.lim.BanDuration
	if n > 0 && d.Count-n <= p.lim.BanLimit {
		p.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "protect: dry run: would ban",
			slog.String("key", d.Key.String()), slog.String("addr", addrString(d.Addr)),
			slog.Int64("count", d.Count), slog.Int64("ban_limit", p.lim.BanLimit),
			slog.Duration("length", p.lim.BanDuration), slog.String("namespace", p.cfg.Namespace))
	}
}

// banned writes the answer of the ban in res into d, out of the hot path.
//
//go:noinline
func (p *Protector) banned(ctx context.Context, d *Decision, res *store.Result) {
	d.Status, d.code, d.Ban = Banned, uint16(p.cfg.BanStatus), res.Ban
	d.RetryAfter, d.BanExpires = res.BanLeft, res.Ban.Expires
	if res.NewBan {
		p.stats.stripe(0).autoBans.Add(1)
		p.logBan(ctx, "protect: ban added", *res.Ban)
		p.escalate(ctx, res.Ban)
	}
}

// logDryRun logs the refusals a dry run lets through.
func (p *Protector) logDryRun(d *Decision) {
	if !p.cfg.DryRun || d.Status < Limited {
		return
	}
	p.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, "protect: dry run: would refuse",
		slog.String("status", d.Status.String()), slog.String("key", d.Key.String()),
		slog.String("addr", addrString(d.Addr)), slog.Int64("count", d.Count))
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
