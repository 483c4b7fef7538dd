package protect

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/httpprotect/protect/internal/clientaddr"
	"github.com/httpprotect/protect/store"
)

// FailurePolicy says what Verify does when the store fails or times out.
// The zero value is FailLocal.
type FailurePolicy uint8

const (
	// FailLocal keeps limiting with a per-process memory store until the
	// shared store answers again. Limits are then per instance, not shared.
	FailLocal FailurePolicy = iota
	// FailOpen serves every request while the store is failing.
	FailOpen
	// FailClosed refuses every counted request with 503 and Retry-After
	// while the store is failing. Safe networks are still served.
	FailClosed
)

var policyNames = [...]string{"local", "open", "closed"}

// String returns "local", "open" or "closed".
func (f FailurePolicy) String() string {
	if int(f) < len(policyNames) {
		return policyNames[f]
	}
	return "FailurePolicy(" + strconv.Itoa(int(f)) + ")"
}

// ParseFailurePolicy parses "local", "open" or "closed".
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	for i, n := range policyNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return FailurePolicy(i), nil
		}
	}
	return 0, fmt.Errorf("protect: failure policy %q: want local, open or closed", s)
}

// Config configures a Protector. The zero value is a working configuration:
// every zero field takes the default shown in brackets.
type Config struct {
	// Store keeps counters and bans [a new memory store, closed by Close].
	// Give every protector and instance of a service one store (package
	// redisstore) for one limit; whoever made it closes it, after them.
	Store Store

	// TTL is the pause that resets a stream: the counter is forgotten
	// after TTL without a request from the key [10s].
	TTL time.Duration
	// MaxRequests is how many requests a stream may make without a pause
	// of TTL; the next ones are Limited [200].
	MaxRequests int64
	// BanLimit is the count past which the key is banned [5 × MaxRequests,
	// so 1000 by default]. Negative disables automatic bans. Following
	// MaxRequests keeps a 429 phase between the limit and the ban: a
	// client that ignores 429s is banned, one that merely sends more than
	// MaxRequests is limited. A BanLimit at or below MaxRequests is allowed
	// and means "ban without a 429 phase": the request past BanLimit is
	// banned before any is limited, which is what a scanner trap wants.
	BanLimit int64
	// BanDuration is the length of a key's first ban [1h].
	BanDuration time.Duration
	// BanFactor multiplies the length of each further ban of a key within
	// OffenseWindow [2]. It must be at least 1.
	BanFactor float64
	// MaxBanDuration caps automatic bans [7 days].
	MaxBanDuration time.Duration
	// OffenseWindow is how long a ban counts towards escalation [7 days].
	OffenseWindow time.Duration

	// TrustedProxies lists your own proxies, as CIDRs or bare addresses
	// [none]. Forwarding headers are read only from these peers: a client
	// that connects directly can write any header it likes.
	TrustedProxies []string
	// ProxyHeader is the header trusted proxies write the client into
	// ["X-Forwarded-For"]. "Forwarded" selects RFC 7239; a name ending in
	// "Forwarded-For" is a comma-separated list; any other name
	// ("X-Real-IP", "CF-Connecting-IP") holds one address, and its last
	// line wins.
	ProxyHeader string
	// ProxyCount, when positive, takes the client to be the ProxyCount-th
	// entry from the right of a list header instead of the first untrusted
	// one [0: walk past TrustedProxies]. With TrustedProxies empty every
	// peer is taken to be a proxy: use it only when clients cannot reach
	// the service except through your proxies.
	ProxyCount int
	// TrustUnixSocket treats a peer on a unix socket as a trusted proxy.
	TrustUnixSocket bool

	// IPv4Prefix is the prefix length IPv4 clients are counted by [32].
	IPv4Prefix int
	// IPv6Prefix is the prefix length IPv6 clients are counted by [64]:
	// one host with a /64 can otherwise rotate through 2^64 addresses.
	IPv6Prefix int
	// EscalationThreshold is how many keys inside one wider prefix of
	// IPv6Escalation or IPv4Escalation must be banned, each within
	// OffenseWindow of the last, for the wider prefix to be banned as a
	// range [3]. Negative turns escalation off.
	EscalationThreshold int
	// IPv6Escalation are the wider prefix lengths IPv6 bans escalate
	// through, longest first [56, 48: those shorter than IPv6Prefix]. On
	// by default: a subscriber's /56 or /48 otherwise rotates through
	// hundreds of /64s with one ban each. Empty, non-nil: off.
	IPv6Escalation []int
	// IPv4Escalation are the wider prefix lengths IPv4 bans escalate
	// through [none], e.g. []int{24}. Off by default: behind carrier-grade
	// NAT, a university or a cloud provider, neighbouring addresses are
	// other people.
	IPv4Escalation []int
	// SafeNetworks are never counted nor banned, and never touch the store
	// [none]: CIDRs or bare addresses.
	SafeNetworks []string
	// BlockLists are refused as Blocked (403, code blocked) after
	// SafeNetworks and before the store is touched [none]: lists you
	// feed in from files or URLs (Spamhaus DROP, FireHOL, IPsum, your
	// own), or live sources (package crowdsec). See BlockList.
	BlockLists []BlockList

	// Namespace prefixes the counters and plan states the protector
	// writes ["protect:"], so that several protectors can share one store.
	// Bans live under BanNamespace. Two protectors with one Namespace on
	// one store share their counters, so they must count with the same
	// limits: New fails when they do not.
	Namespace string
	// BanNamespace names the ban list the protector reads and writes
	// ["protect:"]: key bans, range bans and the offense histories that
	// make bans escalate. Every protector on a store shares it by default,
	// whatever its Namespace: a client banned by the login guard is
	// refused by the API too. Set one apart for a ban list of its own.
	BanNamespace string
	// Name is this protector's policy name in the RateLimit and
	// RateLimit-Policy fields [Namespace without its trailing ':', made an
	// RFC 9651 key: "protect" by default, "login" for "login:"]. Nested
	// protectors each add an item under their own name, so give each its
	// own: an inner protector replaces an outer one's item of the same
	// name ("api:v2:" and "api-v2:" both give "api-v2"). It must be an
	// RFC 9651 key: a-z, 0-9, _ - . *, from a letter or *, ≤ 64 bytes.
	Name string
	// OnStoreError is what happens when the store fails [FailLocal].
	OnStoreError FailurePolicy
	// StoreTimeout bounds every store call [100ms]; at least 1ms.
	StoreTimeout time.Duration

	// DryRun decides, logs and writes headers, but never refuses. It
	// counts and reads the ban list, but never writes a ban (a stream past
	// BanLimit is Banned, "would ban" logged once). Give it a Namespace of
	// its own, or a live protector's requests are counted twice.
	DryRun bool
	// BanStatus is the status code of a ban refusal [403].
	BanStatus int
	// UnknownStatus is the status code when the client address cannot be
	// determined [429]; 400 is the other sensible choice.
	UnknownStatus int

	// KeyFunc, when set, makes Verify count a resolved consumer (after
	// authentication) instead of the client address. ok false falls back
	// to the address. The key should be an identifier, not a secret; see
	// ConsumerKey for how it is stored.
	KeyFunc func(r *http.Request) (key string, ok bool)
	// ConsumerFunc, when set, makes Verify and Middleware hold an
	// authenticated consumer to its plan [nil: none]: it returns the
	// consumer (an identifier, stored under ConsumerKey) and its plan,
	// read from the request after your authentication has run; ok false
	// counts the address. A nil plan with ok true is Unknown: a consumer
	// whose plan is not found is never unlimited. Setting both KeyFunc
	// and ConsumerFunc is an error.
	ConsumerFunc func(r *http.Request) (consumer string, plan *Plan, ok bool)
	// Plan, when set, holds every address (or KeyFunc key) of the
	// protector to a plan, in place of the MaxRequests stream limit [nil:
	// the stream limit]. The stream counter keeps counting every request
	// beside it, refused or not, in the same atomic step, so a client that
	// keeps sending through the refusals still passes BanLimit.
	Plan *Plan
	// CountStatus, when set, makes Middleware count failures instead of
	// requests [nil: every request counts]: it checks the client before
	// the handler without counting, and counts the request only if the
	// response status satisfies CountStatus: 401s for a login guard, 404s
	// for a scanner trap. MaxRequests is then the number of failures a
	// client may make without a pause of TTL; each refused attempt counts
	// too, so a client that keeps trying is banned. See Middleware.
	CountStatus func(status int) bool
	// Skip, when set, makes Middleware pass the requests it reports true
	// for straight to the handler [nil: none]: not resolved, not counted,
	// no fields, no decision for FromContext (a health check, say). Anyone
	// can send such a request: never match a header a client controls.
	Skip func(r *http.Request) bool
	// OnRefused, when set, writes Middleware's refusals in place of the
	// problem+json body [nil: Decision.WriteResponse]. Middleware has
	// already written the decision's fields (Retry-After, RateLimit,
	// Cache-Control: no-store; see Decision.WriteHeaders) into w's header;
	// OnRefused writes the status (d.StatusCode() is the default's) and
	// the body. d is refused; d.Err is for logs, never for the client.
	OnRefused func(w http.ResponseWriter, r *http.Request, d Decision)
	// Challenge, when set, asks a client past Challenge.After to prove
	// it is a browser before BanLimit bans it [nil: off].
	Challenge *ChallengeConfig
	// Logger receives ban, lift and store state events [slog.Default()].
	Logger *slog.Logger
	// Clock tells the time for the circuit breaker and the default memory
	// store [time.Now]. Tests inject a fake one.
	Clock func() time.Time
}

// Defaults.
const (
	DefaultTTL         = 10 * time.Second
	DefaultMaxRequests = 200
	// DefaultBanLimit is the BanLimit under the default MaxRequests: New
	// sets a zero BanLimit to DefaultBanLimitFactor × MaxRequests.
	DefaultBanLimit       = DefaultBanLimitFactor * DefaultMaxRequests
	DefaultBanLimitFactor = 5
	DefaultBanDuration    = time.Hour
	DefaultBanFactor      = 2
	DefaultMaxBanDuration = 7 * 24 * time.Hour
	DefaultOffenseWindow  = 7 * 24 * time.Hour
	DefaultProxyHeader    = "X-Forwarded-For"
	DefaultNamespace      = "protect:"
	DefaultStoreTimeout   = 100 * time.Millisecond
)

// ErrConfig is wrapped by every configuration error from New and from
// package envconfig.
var ErrConfig = errors.New("protect: bad config")

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

// A ConfigError is one problem with one Config field. New reports every
// problem it finds at once, joined (errors.Join), so a service with three
// mistakes learns of all three in one run; each problem is a
// *ConfigError, found with errors.As, and wraps ErrConfig. A program that
// reads its settings from elsewhere (package envconfig) names its own
// setting from Field.
type ConfigError struct {
	// Field is the Config field: "TTL", "BanFactor", "TrustedProxies".
	Field string
	// Value is the value, formatted; "" when the problem is not one value's.
	Value string
	// Reason says what is wrong and what would be right.
	Reason string
	// Err is the error beneath, if any.
	Err error
}

// Error reads "protect: bad config: BanFactor 0.5: must be a number of at
// least 1".
func (e *ConfigError) Error() string {
	v := e.Field
	if e.Value != "" {
		v += " " + e.Value
	}
	return ErrConfig.Error() + ": " + v + ": " + e.Reason
}

// Unwrap returns ErrConfig and the error beneath.
func (e *ConfigError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrConfig, e.Err}
	}
	return []error{ErrConfig}
}

// fieldErr is a *ConfigError of field for value v.
func fieldErr(field string, v any, format string, args ...any) error {
	e := &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
	if v != nil {
		e.Value = fmt.Sprint(v)
	}
	return e
}

// Validate reports every problem New would find with c, without making
// a protector or touching a store: the error is nil, or every problem
// joined, each a *ConfigError.
func (c Config) Validate() error {
	_, err := c.checked()
	return err
}

// checked is withDefaults, and the parsed address lists.
func (c Config) checked() (checkedConfig, error) {
	cc := checkedConfig{}
	var errs []error
	var err error
	if cc.Config, err = c.withDefaults(); err != nil {
		errs = append(errs, err)
	}
	if cc.trusted, err = clientaddr.ParseNetList(c.TrustedProxies); err != nil {
		errs = append(errs, &ConfigError{Field: "TrustedProxies", Reason: err.Error(), Err: err})
	}
	if cc.safe, err = clientaddr.ParseNetList(c.SafeNetworks); err != nil {
		errs = append(errs, &ConfigError{Field: "SafeNetworks", Reason: err.Error(), Err: err})
	}
	return cc, errors.Join(errs...)
}

// checkedConfig is a Config with its defaults and its lists parsed.
type checkedConfig struct {
	Config
	trusted, safe clientaddr.NetList
}

// withDefaults checks c and fills in its zero fields, one group of
// fields after another, and reports every problem at once, in the order
// of the steps. A step may read the fields of the steps before it, which
// are complete: BanLimit's default is made of MaxRequests, and the
// escalation lengths are checked against the prefix lengths.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	for _, step := range []func(*Config) []error{
		(*Config).limitDefaults,
		(*Config).banDefaults,
		(*Config).clientAddrDefaults,
		(*Config).escalationDefaults, // escalate.go
		(*Config).checkKeyFuncs,
		(*Config).namespaceDefaults,
		(*Config).failureDefaults,
		(*Config).statusDefaults,
		(*Config).challengeDefaults, // challenge.go
		(*Config).runtimeDefaults,
	} {
		errs = append(errs, step(&c)...)
	}
	return c, errors.Join(errs...)
}

// limitDefaults checks and completes the limit (MaxRequests in TTL) and
// the other durations. StoreTimeout is one of them: it shares their
// bounds and table, and its floor is checked here, before TTL's.
func (c *Config) limitDefaults() []error {
	var errs []error
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"TTL", &c.TTL, DefaultTTL},
		{"BanDuration", &c.BanDuration, DefaultBanDuration},
		{"MaxBanDuration", &c.MaxBanDuration, DefaultMaxBanDuration},
		{"OffenseWindow", &c.OffenseWindow, DefaultOffenseWindow},
		{"StoreTimeout", &c.StoreTimeout, DefaultStoreTimeout},
	}
	for _, d := range durations {
		if *d.v < 0 {
			errs = append(errs, fieldErr(d.name, *d.v, "must not be negative"))
			*d.v = 0
		}
		if *d.v > MaxDuration {
			errs = append(errs, fieldErr(d.name, *d.v, "longer than %v", MaxDuration))
			*d.v = 0
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.StoreTimeout < time.Millisecond {
		// A store call cannot finish in less: every request would fail
		// its deadline and be decided by OnStoreError.
		errs = append(errs, fieldErr("StoreTimeout", c.StoreTimeout, "must be at least 1ms"))
	}
	if c.TTL < time.Millisecond {
		errs = append(errs, fieldErr("TTL", c.TTL, "must be at least 1ms"))
	}
	if c.MaxRequests < 0 {
		errs = append(errs, fieldErr("MaxRequests", c.MaxRequests, "must not be negative"))
		c.MaxRequests = 0
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = DefaultMaxRequests
	}
	return errs
}

// banDefaults checks and completes BanLimit, BanFactor and the ban
// lengths' order, of the complete MaxRequests and durations.
func (c *Config) banDefaults() []error {
	var errs []error
	if c.BanLimit == 0 {
		// Saturating: a MaxRequests near MaxInt64 bans at MaxInt64, never
		// at a wrapped negative (which would disable bans).
		c.BanLimit = math.MaxInt64
		if c.MaxRequests <= math.MaxInt64/DefaultBanLimitFactor {
			c.BanLimit = DefaultBanLimitFactor * c.MaxRequests
		}
	}
	if c.BanFactor == 0 {
		c.BanFactor = DefaultBanFactor
	}
	if math.IsNaN(c.BanFactor) || math.IsInf(c.BanFactor, 0) || c.BanFactor < 1 {
		errs = append(errs, fieldErr("BanFactor", c.BanFactor, "must be a number of at least 1"))
	}
	if c.MaxBanDuration < c.BanDuration {
		errs = append(errs, fieldErr("MaxBanDuration", c.MaxBanDuration, "shorter than BanDuration %v", c.BanDuration))
	}
	return errs
}

// clientAddrDefaults checks and completes what resolves a client's
// address and its counting key: ProxyHeader, ProxyCount and the prefix
// lengths. (TrustedProxies and SafeNetworks are parsed by checked.)
func (c *Config) clientAddrDefaults() []error {
	var errs []error
	if c.ProxyHeader == "" {
		c.ProxyHeader = DefaultProxyHeader
	}
	if !clientaddr.ValidHeaderName(c.ProxyHeader) {
		errs = append(errs, fieldErr("ProxyHeader", strconv.Quote(c.ProxyHeader), "not a header name"))
	}
	if c.ProxyCount < 0 {
		errs = append(errs, fieldErr("ProxyCount", c.ProxyCount, "must not be negative"))
	}
	if c.IPv4Prefix == 0 {
		c.IPv4Prefix = 32
	}
	if c.IPv6Prefix == 0 {
		c.IPv6Prefix = 64
	}
	if c.IPv4Prefix < 1 || c.IPv4Prefix > 32 {
		errs = append(errs, fieldErr("IPv4Prefix", c.IPv4Prefix, "want 1 to 32"))
		c.IPv4Prefix = 32
	}
	if c.IPv6Prefix < 1 || c.IPv6Prefix > 128 {
		errs = append(errs, fieldErr("IPv6Prefix", c.IPv6Prefix, "want 1 to 128"))
		c.IPv6Prefix = 64
	}
	return errs
}

// checkKeyFuncs checks what resolves a request's key and plan: KeyFunc
// or ConsumerFunc, and Plan. It fills in nothing.
func (c *Config) checkKeyFuncs() []error {
	var errs []error
	if c.KeyFunc != nil && c.ConsumerFunc != nil {
		errs = append(errs, fieldErr("ConsumerFunc", nil, "KeyFunc and ConsumerFunc are both set: set one (ConsumerFunc resolves a consumer and its plan; KeyFunc a key for the protector's own limit)"))
	}
	if c.Plan != nil && c.Plan.Len() == 0 {
		errs = append(errs, fieldErr("Plan", nil, "not made by NewPlan"))
	}
	return errs
}

// namespaceDefaults checks and completes Namespace, BanNamespace and
// Name, whose default is made of Namespace.
func (c *Config) namespaceDefaults() []error {
	var errs []error
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.BanNamespace == "" {
		c.BanNamespace = DefaultNamespace
	}
	// Braces would move the hash tag of every Redis key: a client's keys
	// would no longer share a cluster slot with each other alone.
	if strings.ContainsAny(c.Namespace, "{}") {
		errs = append(errs, fieldErr("Namespace", strconv.Quote(c.Namespace), "must not contain { or }"))
	}
	if strings.ContainsAny(c.BanNamespace, "{}") {
		errs = append(errs, fieldErr("BanNamespace", strconv.Quote(c.BanNamespace), "must not contain { or }"))
	}
	if c.Name == "" {
		c.Name = policyName(c.Namespace)
	} else if err := store.CheckLimitName(c.Name); err != nil {
		errs = append(errs, &ConfigError{Field: "Name", Value: strconv.Quote(c.Name), Reason: err.Error(), Err: err})
	}
	return errs
}

// failureDefaults checks OnStoreError, whose zero value is FailLocal.
// StoreTimeout, the deadline that makes a store call a failure, is
// checked with the other durations (limitDefaults).
func (c *Config) failureDefaults() []error {
	if c.OnStoreError > FailClosed {
		return []error{fieldErr("OnStoreError", int(c.OnStoreError), "want FailLocal, FailOpen or FailClosed")}
	}
	return nil
}

// statusDefaults checks and completes BanStatus and UnknownStatus.
func (c *Config) statusDefaults() []error {
	var errs []error
	if c.BanStatus == 0 {
		c.BanStatus = http.StatusForbidden
	}
	if c.UnknownStatus == 0 {
		c.UnknownStatus = http.StatusTooManyRequests
	}
	if c.BanStatus < 400 || c.BanStatus > 599 {
		errs = append(errs, fieldErr("BanStatus", c.BanStatus, "want a 4xx or 5xx code"))
	}
	if c.UnknownStatus < 400 || c.UnknownStatus > 599 {
		errs = append(errs, fieldErr("UnknownStatus", c.UnknownStatus, "want a 4xx or 5xx code"))
	}
	return errs
}

// runtimeDefaults completes Logger and Clock; neither can be wrong.
func (c *Config) runtimeDefaults() []error {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return nil
}

// policyName makes a RateLimit policy name of a namespace: without its
// trailing ':', in lower case, with what an RFC 9651 key cannot hold
// replaced by '-' ("login:" → "login", "API:v2:" → "api-v2").
func policyName(ns string) string {
	b := []byte(strings.ToLower(strings.TrimRight(ns, ":")))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("_-.*", c) >= 0) {
			b[i] = '-'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	if store.CheckLimitName(string(b)) != nil {
		return "protect" // nothing usable: a namespace of digits, say
	}
	return string(b)
}
