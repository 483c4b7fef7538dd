package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A Store keeps stream counters, bans and offense histories. Protect ships
// two: memstore.Store (one process) and redisstore.Store (shared by every
// instance). Package storetest holds the conformance suite that a new
// Store must pass.
//
// A Protector meets its store at one seam: it binds its namespace and its
// limits once, with Space, and then calls only the Space it got. A store
// therefore never looks a namespace up per request, and every store goes
// through the same code in the Protector.
type Store interface {
	// Space returns the part of the store that scope names, bound to
	// scope's limits. Spaces of one Namespace share their counters and
	// plan states; spaces of one BanNamespace share their bans and
	// offense histories. It fails on a scope the store cannot hold (a
	// namespace it cannot write, say), and with ErrLimitsDiffer on a
	// Namespace this store has already bound to other Limits: two
	// protectors counting one counter against two limits would each
	// enforce neither. A store remembers each Namespace's Limits for its
	// whole life.
	Space(scope Scope) (Space, error)

	// Published returns the Limits that a Space published under
	// namespace (Space.Publish), in this process or any other that shares
	// the store; false when none did.
	Published(ctx context.Context, namespace string) (Limits, bool, error)

	// Close releases the store's resources. A store passed in Config is
	// not closed by Protector.Close: whoever made it closes it.
	Close() error
}

// A Scope names what one protector reads and writes in a Store. The zero
// Scope is the namespace "" with zero Limits, which forget every count at
// once: a Protector always fills it in.
//
// Fields may be added; a store must treat a field it does not know as
// absent.
type Scope struct {
	// Namespace prefixes the counters and plan states the space writes,
	// so that protectors sharing a store count apart.
	Namespace string
	// BanNamespace prefixes the bans and offense histories the space
	// reads and writes: key bans, range bans, and the records that make
	// bans escalate. Protectors with one BanNamespace share one ban list,
	// whatever their Namespaces: a client banned by one is refused by
	// every other. Empty means Namespace.
	BanNamespace string
	// Limits decide Space.Take.
	Limits Limits
}

// A Space is a Store bound to one Scope. Every method must be safe for
// concurrent use.
//
// The contract that makes limits exact: Take performs steps 3–5 of the
// pipeline — ban check, count, threshold ban — as one atomic operation per
// key. There is no read-then-write across calls, so any number of
// concurrent Takes on one key, from any number of processes, see each count
// exactly once. A store shared over a network makes one round trip per
// Take.
//
// Expiry is measured by the store's own clock. Counters are forgotten after
// Limits.TTL without a counted Take; bans end at their expiry unless
// permanent.
type Space interface {
	// Take decides a request of key k from client address addr (the zero
	// Addr when there is none) and counts n for it:
	//
	//   - k, or a range ban containing addr, is banned: Result.Ban set,
	//     nothing counted;
	//   - n is 0: nothing is written; Result.Count is the count as it is;
	//   - otherwise the counter goes up by n and its expiry is reset to
	//     TTL; if the count is past BanLimit (and BanLimit is not
	//     negative), the counter is deleted, an offense is recorded and a
	//     ban of BanLength(lim, offenses) is written: Result.NewBan.
	//
	// Comparing the count with MaxRequests is left to the caller. n is
	// never negative.
	Take(ctx context.Context, k Key, addr netip.Addr, n int64) (Result, error)

	// TakePlan decides a request of key k from client address addr under
	// plan, at a cost of cost, in one atomic step whatever the number of
	// limits:
	//
	//   - k, or a range ban containing addr, is banned: Result.Ban set,
	//     Decider -1, nothing counted or charged;
	//   - with stream, k's stream counter then counts cost exactly as
	//     Take does, refused or not, and crossing BanLimit writes the
	//     same escalating ban: Result.NewBan, the plan not charged;
	//   - every limit of plan is checked against cost by the store's
	//     clock; if any refuses, none is charged; if all admit, each is
	//     charged cost (PlanResult.Charged). Cost 0 checks a request of
	//     cost 1 and writes nothing, the stream included.
	//
	// State is kept per key and limit name, so a key moved to another plan
	// keeps the state of the limits the two plans share by name (a quota
	// also by period). Every piece of it is forgotten once it no longer
	// matters: a rate's when its bucket is full, a quota's when its window
	// ends. A store shared over a network makes one round trip. The
	// limits' states are reported, in the plan's order, in PlanResult.
	TakePlan(ctx context.Context, k Key, addr netip.Addr, plan *Plan, cost int64, stream bool) (PlanResult, error)

	// AddBan writes b, replacing any ban on the same key, and returns it
	// as stored: Created is set by the store's clock, and Expires from
	// length unless the ban is permanent (length 0). b.Range selects a
	// range ban. A key ban also deletes the key's counter, and an
	// operator's range ban (SourceManual) the counters of the keys inside
	// it, in the space's Namespace, so that they start from nothing once
	// the ban is lifted. An automatic range ban (prefix escalation,
	// written inside a client's request) resets nothing: finding the
	// counters inside a range may mean a scan of the whole store, which
	// no request may wait for; the keys that caused it were reset by
	// their own bans. (Counters left so, and counters in other namespaces
	// sharing the ban list, expire: a banned request is never counted, so
	// they are gone within their TTL.)
	AddBan(ctx context.Context, b Ban, length time.Duration) (Ban, error)

	// Lift removes the ban on exactly k, key or range, and reports the
	// ban it removed. Lifting a key that is not banned is not an error.
	Lift(ctx context.Context, k Key) (Ban, bool, error)

	// Bans lists the active bans that f selects, in no given order.
	Bans(ctx context.Context, f BanFilter) ([]Ban, error)

	// Inspect reports the state of k without changing it.
	Inspect(ctx context.Context, k Key) (KeyState, error)

	// Publish writes the space's Limits under its Namespace, replacing
	// what was published there, so that Store.Published tells tools and
	// other instances the numbers this namespace is counted against. A
	// store that can lose what it holds (Redis: a restart, an eviction)
	// writes them again by itself while it runs, and lets them expire
	// once no running store does, so that a namespace whose services are
	// gone does not show their numbers for ever.
	Publish(ctx context.Context) error
}

// Limits are the numbers a Space needs to decide a Take. A Protector
// derives them from its Config; the zero value is not meaningful (a TTL of
// zero forgets every count at once).
type Limits struct {
	// MaxRequests is the count past which requests are limited. Take
	// leaves that comparison to its caller; a store only publishes it and
	// compares it when a namespace is bound twice.
	MaxRequests    int64
	TTL            time.Duration // a counter is forgotten after TTL without requests
	BanLimit       int64         // the count past which a ban is written; negative: never
	BanDuration    time.Duration // the first ban's length
	BanFactor      float64       // each further ban within OffenseWindow is this much longer
	MaxBanDuration time.Duration // no automatic ban is longer
	OffenseWindow  time.Duration // how long a ban counts towards escalation
	// BanReason is recorded on the bans Take writes; when empty, "stream
	// passed the ban limit of <BanLimit> requests".
	BanReason string
}

// Check reports limits a store cannot apply: a TTL that forgets every
// count at once, negative lengths, a ban factor below 1. Config never
// makes such limits; a Space bound by hand might. A store's Space calls
// it before binding.
func (lim *Limits) Check() error {
	switch {
	case lim.TTL <= 0:
		return fmt.Errorf("protect: limits: TTL %v: must be positive", lim.TTL)
	case lim.BanDuration < 0 || lim.MaxBanDuration < 0 || lim.OffenseWindow < 0:
		return fmt.Errorf("protect: limits: BanDuration %v, MaxBanDuration %v, OffenseWindow %v: must not be negative",
			lim.BanDuration, lim.MaxBanDuration, lim.OffenseWindow)
	case !(lim.BanFactor >= 1) || math.IsInf(lim.BanFactor, 0):
		return fmt.Errorf("protect: limits: BanFactor %v: must be a number of at least 1", lim.BanFactor)
	}
	return nil
}

// CheckBan returns b as a store keeps it, or an error for a ban no store
// can hold; a store's AddBan calls it first. Who added it (By) loses any
// '|', so that every store keeps the same text whatever separates its
// record's fields; Reason and By are cut to MaxReasonLen bytes.
func CheckBan(b Ban) (Ban, error) {
	switch {
	case b.Key.IsZero() || (b.Range && !b.Key.Prefix.IsValid()):
		return Ban{}, ErrEmptyKey
	case b.Source != SourceAuto && b.Source != SourceManual:
		return Ban{}, fmt.Errorf("protect: ban %s: source %q: want %q or %q", b.Key, b.Source, SourceAuto, SourceManual)
	}
	b.By = strings.ReplaceAll(b.By, "|", "/")
	b.Reason, b.By = cutText(b.Reason, MaxReasonLen), cutText(b.By, MaxReasonLen)
	return b, nil
}

// cutText cuts s to at most n bytes, at the start of a UTF-8 character.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ErrEmptyKey is the error of a store asked about the zero Key.
var ErrEmptyKey = errors.New("protect: empty key")

// Reason is the reason a store records on the bans Take writes under lim:
// BanReason, or when that is empty one that states the BanLimit.
func (lim *Limits) Reason() string {
	if lim.BanReason != "" {
		return lim.BanReason
	}
	return "stream passed the ban limit of " + strconv.FormatInt(lim.BanLimit, 10) + " requests"
}

// Result is the outcome of Space.Take. The zero Result is a request that
// was not counted and not banned.
type Result struct {
	// Count is the stream's count, including what this Take counted. It
	// is zero when a ban answered before counting.
	Count int64
	// NewBan reports that this Take crossed BanLimit and wrote Ban.
	NewBan bool
	// Allowed reports that the key, or a range holding addr, is on the
	// space's allowlist (Allowlist): nothing was counted and no ban
	// looked at, and every other field is zero.
	Allowed bool
	// Ban is the ban that refuses the request (see Banned), else nil. It
	// may be shared: treat it as read-only.
	Ban *Ban
	// BanLeft is the time until the ban ends, by the store's clock; zero
	// for a permanent ban.
	BanLeft time.Duration
}

// Banned reports that the request is refused by a ban: r.Ban describes it.
func (r *Result) Banned() bool { return r.Ban != nil }

// BanFilter selects bans in Space.Bans. The zero BanFilter selects every
// ban.
type BanFilter struct {
	// RangesOnly selects range bans alone. It is cheap where listing every
	// ban is not: on Redis one read of one hash, never a scan of the
	// keyspace.
	RangesOnly bool
	// Within, when valid, selects the bans on keys and ranges inside it.
	// Consumer bans are never inside a network.
	Within netip.Prefix
}

// Match reports whether f selects b.
func (f BanFilter) Match(b Ban) bool {
	if f.RangesOnly && !b.Range {
		return false
	}
	if f.Within.IsValid() {
		p := b.Key.Prefix
		return p.IsValid() && f.Within.Bits() <= p.Bits() && f.Within.Contains(p.Addr())
	}
	return true
}

// KeyState is what Space.Inspect reports about one key. The zero value is
// a key with no counter, no ban and no offenses.
type KeyState struct {
	Key      Key
	Count    int64         // the current stream count; 0 when forgotten
	CountTTL time.Duration // time until the counter is forgotten without requests
	Ban      *Ban          // the active ban on the key itself (key or range), or nil
	Offenses int           // bans recorded within the offense window
	// Usage is what the store holds for the plan limits of the key, in no
	// given order: a quota's usage in its current window, a rate's
	// backlog.
	Usage []LimitUsage
}
