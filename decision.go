package protect

import (
	"hash/maphash"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"
)

// Status is the outcome of one verification. The zero value is Allowed.
type Status uint8

const (
	// Allowed: counted, within the limit.
	Allowed Status = iota
	// Safe: the client is in SafeNetworks, where the store was not
	// touched, or its key or address is on the store's allowlist
	// (store.Allowlist); nothing was counted.
	Safe
	// Limited: the stream passed MaxRequests; refused with 429 until the
	// client pauses for TTL.
	Limited
	// Banned: the client's key, or a range containing its address, is on
	// the block list; refused with Config.BanStatus.
	Banned
	// Unknown: the client's address could not be determined; refused with
	// Config.UnknownStatus and never counted.
	Unknown
	// Unavailable: the store failed and the failure policy is FailClosed;
	// refused with 503.
	Unavailable
	// Exhausted: a quota of the consumer's plan is used up until its
	// window ends; refused with 429 and code quota_exceeded, so that a
	// client can tell "come back next month" from "slow down".
	Exhausted
	// Blocked: the client's address is on one of Config.BlockLists (a
	// list you feed in, or a live source such as CrowdSec's decisions):
	// refused with 403 and code blocked, with no Retry-After, since a
	// list says nothing of when an entry leaves it. Decided before the
	// store is touched; it is not a ban, and nothing lifts it but the
	// list itself.
	Blocked
	// Challenged: past Config.Challenge.After, or on a block list marked
	// Challenge, without a valid pass; refused with 403, and Middleware
	// serves the proof-of-work page.
	Challenged
)

var statusNames = [...]string{"allowed", "safe", "limited", "banned", "unknown", "unavailable", "exhausted", "blocked", "challenged"}

// String returns the status in lower case: "allowed", "safe", "limited",
// "banned", "unknown", "unavailable", "exhausted", "blocked",
// "challenged".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// Code returns the machine-readable problem code sent in a refusal body:
// "rate_limited", "quota_exceeded", "banned", "blocked",
// "unknown_client", "unavailable" or "challenged"; "" for a status that
// is never refused.
func (s Status) Code() string {
	switch s {
	case Limited:
		return "rate_limited"
	case Exhausted:
		return "quota_exceeded"
	case Banned:
		return "banned"
	case Blocked:
		return "blocked"
	case Unknown:
		return "unknown_client"
	case Unavailable:
		return "unavailable"
	case Challenged:
		return "challenged"
	}
	return ""
}

// Decision is the answer to one verification. The zero Decision allows.
//
// One question, one answer: Refused. There is no second boolean to combine
// with it.
type Decision struct {
	Status Status
	// DryRun reports a decision made with Config.DryRun: it is logged and
	// its headers are written, but it never refuses.
	DryRun bool
	// code sits beside Status and DryRun, so that the three fill one word:
	// a Decision is returned, and copied, by value, and every word of it
	// is a store on every request.
	code uint16 // the refusal status code; 0: the Status's own
	// Addr is the resolved client address, unmapped and zone-free; zero
	// for VerifyKey and when the address is unknown.
	Addr netip.Addr
	// Key is what was counted (for Check, looked at): 203.0.113.7/32,
	// 2001:db8:1:2::/64 or a consumer key; zero when nothing was.
	Key Key
	// Count is the stream's count including this request; zero under a
	// consumer's plan, which has no stream.
	Count int64
	// Limit is MaxRequests; under a plan, the Limit of the limit that
	// decided (see Policy).
	Limit int64
	// Remaining is how many more requests the stream may make before it
	// is limited (never negative); under a plan, what the deciding limit
	// has left.
	Remaining int64
	// RetryAfter is how long a refused client should wait: TTL when
	// Limited, a ban's time left (zero when permanent); under a plan,
	// until the request fits every limit, zero when it never will (Err).
	RetryAfter time.Duration
	// BanExpires is when the ban ends; zero for a permanent ban, and
	// when not Banned.
	BanExpires time.Time
	// Ban is the ban that refused the request when Banned, else nil. It
	// may be shared with other decisions: treat it as read-only. When
	// Blocked, it describes the list entry that refused the request, and
	// is no ban record: Source is SourceList, By the list's name, Key the
	// entry (Range set) and Reason the list's note on it, if any (a
	// Spamhaus SBL reference, a CrowdSec scenario).
	Ban *Ban
	// Window is the TTL: the pause that makes the stream start again;
	// under a plan, the deciding limit's Period (a quota's nominal one).
	Window time.Duration
	// Policy names the limit of a plan that decided: of those that
	// refused, the longest wait; when served, the one with the least
	// left. Empty for the stream limit and when no limit decided.
	Policy string
	// Err explains an Unknown decision (it wraps ErrUnknownClient), or
	// holds a store error that the failure policy absorbed. It is for
	// logs: it never reaches a response.
	Err error

	// hdr holds the field values of the protector, or under a plan those
	// of the plan (hdr.plan); nil when nothing was counted.
	hdr *headerValues
	// Under a plan, each limit's r and t for the RateLimit field, kept
	// inline so that deciding allocates nothing, and in 32 bits, as
	// every request copies them (r stops at maxPlanLeft).
	planLeft  [MaxPlanLimits]uint32
	planReset [MaxPlanLimits]uint32 // seconds
}

// maxPlanLeft is the most a plan's RateLimit field reports left of one
// limit: a limit of more reports this until its remaining falls below.
// It understates, which a client can only read as "slow down".
const maxPlanLeft = math.MaxUint32

// headerValues are a protector's RateLimit field values, made once: the
// policy, and the RateLimit value for each remaining count while the
// stream is counted (t is then always the TTL). Writing them allocates
// nothing.
type headerValues struct {
	name   string // the item's key in both fields: Config.Name, or a plan's first limit's name
	policy []string
	rate   [][]string // rate[r] is `"<name>";r=<r>;t=<ttl>`; nil for a plan
	plan   *Plan      // the plan whose values these are; nil for a protector's
}

// maxPrecomputed bounds the RateLimit values made in advance.
const maxPrecomputed = 1024

func newHeaderValues(name string, limit int64, window time.Duration) *headerValues {
	hv := &headerValues{name: name, policy: []string{`"` + name + `";q=` + strconv.FormatInt(limit, 10) + ";w=" + strconv.FormatInt(seconds(window), 10)}}
	hv.rate = make([][]string, min(limit, maxPrecomputed)+1)
	for r := range hv.rate {
		hv.rate[r] = []string{hv.rateLimitValue(int64(r), seconds(window))}
	}
	return hv
}

func (hv *headerValues) rateLimitValue(remaining, t int64) string {
	var buf [128]byte
	b := append(buf[:0], '"')
	b = append(b, hv.name...)
	b = append(b, `";r=`...)
	b = strconv.AppendInt(b, remaining, 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, t, 10)
	return string(b)
}

// Refused reports whether the request must be refused. It is false for
// every decision made in dry-run mode.
func (d Decision) Refused() bool {
	if d.DryRun {
		return false
	}
	switch d.Status {
	case Limited, Banned, Unknown, Unavailable, Exhausted, Blocked, Challenged:
		return true
	}
	return false
}

// StatusCode returns the HTTP status to answer with: 200 when not refused,
// otherwise 429 (Limited, Exhausted), Config.BanStatus (Banned, 403 by default),
// 403 (Blocked, Challenged),
// Config.UnknownStatus (Unknown, 429 by default) or 503 (Unavailable).
func (d Decision) StatusCode() int {
	if !d.Refused() {
		return http.StatusOK
	}
	if d.code != 0 {
		return int(d.code)
	}
	switch d.Status {
	case Banned, Blocked, Challenged:
		return http.StatusForbidden
	case Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusTooManyRequests
}

// WriteHeaders writes the decision's response fields to h:
//
//   - every counted decision: RateLimit-Policy: "protect";q=<limit>;w=<ttl>
//     and RateLimit: "protect";r=<remaining>;t=<seconds>, as
//     draft-ietf-httpapi-ratelimit-headers-11 defines them. t is a delta in
//     seconds, never a date: the silence that resets the stream, or for a
//     ban the time it has left.
//   - every refusal: Retry-After in whole seconds, rounded up (none for a
//     permanent ban or an unknown client), and Cache-Control: no-store.
//
// Under a plan, RateLimit-Policy lists every limit of the plan as
// "<name>";q=<Limit>;w=<seconds> (Plan.Policy), and RateLimit the state of
// each as "<name>";r=<left>;t=<seconds>, where t is, for a limit that
// refused, the time until the request fits, else the time until the
// limit is whole again. A ban writes RateLimit-Policy alone.
//
// The fields compose: another protector's item in h (Config.Name) is
// kept, this one's replaced, so nested protectors each report their own.
// The value slices it stores are shared: replace them, never modify them.
func (d Decision) WriteHeaders(h http.Header) {
	if d.hdr != nil {
		own := d.hdr.name
		setField(h, "Ratelimit-Policy", own, d.hdr.policy)
		switch {
		case d.hdr.plan != nil && d.Status != Banned:
			setField(h, "Ratelimit", own, []string{d.planRateLimit()})
		case d.hdr.plan != nil:
			dropField(h, "Ratelimit", own) // an earlier decision's item would say what is left
		case d.Status != Banned && d.Remaining < int64(len(d.hdr.rate)):
			setField(h, "Ratelimit", own, d.hdr.rate[d.Remaining])
		case d.Status != Banned:
			setField(h, "Ratelimit", own, []string{d.hdr.rateLimitValue(d.Remaining, seconds(d.Window))})
		case d.RetryAfter > 0:
			setField(h, "Ratelimit", own, []string{d.hdr.rateLimitValue(0, seconds(d.RetryAfter))})
		default: // a permanent ban: nothing is left, and nothing resets
			dropField(h, "Ratelimit", own)
		}
	}
	if !d.Refused() {
		return
	}
	if d.RetryAfter > 0 {
		h["Retry-After"] = []string{strconv.FormatInt(seconds(d.RetryAfter), 10)}
	}
	h["Cache-Control"] = []string{"no-store"}
}

// WriteResponse writes the whole refusal: WriteHeaders, the status code
// and an application/problem+json body (RFC 9457) with a machine-readable
// "code". It writes nothing when d is not refused. The body never holds a
// store error or anything the client sent.
func (d Decision) WriteResponse(w http.ResponseWriter) {
	if !d.Refused() {
		return
	}
	h := w.Header()
	d.WriteHeaders(h)
	h["Content-Type"] = []string{"application/problem+json"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	code := d.StatusCode()
	w.WriteHeader(code)
	w.Write(d.problem(code))
}

// planRateLimit formats the RateLimit field of a plan's decision.
func (d *Decision) planRateLimit() string {
	var buf [256]byte
	b := buf[:0]
	plan := d.hdr.plan
	for i := range plan.Len() {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '"')
		b = append(b, plan.Spec(i).Name...)
		b = append(b, `";r=`...)
		b = strconv.AppendUint(b, uint64(d.planLeft[i]), 10)
		b = append(b, ";t="...)
		b = strconv.AppendUint(b, uint64(d.planReset[i]), 10)
	}
	return string(b)
}

// problem returns the RFC 9457 body for a refusal.
func (d Decision) problem(code int) []byte {
	var detail string
	switch d.Status {
	case Limited:
		detail = "Too many requests without a pause. Pause for retry_after seconds and the limit starts over."
		if d.hdr != nil && d.hdr.plan != nil {
			detail = "Too many requests for this plan's rate. Retry after retry_after seconds."
			if d.RetryAfter <= 0 {
				detail = "This request costs more than this plan's rate ever allows at once."
			}
		}
	case Exhausted:
		detail = "This plan's quota is used up until its window ends in retry_after seconds. Do not retry before then."
		if d.RetryAfter <= 0 {
			detail = "This request costs more than this plan's quota allows in a whole window."
		}
	case Banned:
		detail = "This client is banned."
		if d.RetryAfter > 0 {
			detail = "This client is banned until retry_after seconds have passed."
		}
	case Blocked:
		detail = "This client's address is on a block list."
	case Challenged:
		detail = "This client has sent many requests: load the page in a browser, which proves it is one."
	case Unknown:
		detail = "The client address could not be determined."
	case Unavailable:
		detail = "The request cannot be checked right now. Retry later."
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"type":"about:blank","title":`...)
	b = strconv.AppendQuote(b, http.StatusText(code))
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"code":"`...)
	b = append(b, d.Status.Code()...)
	b = append(b, `","detail":`...)
	b = strconv.AppendQuote(b, detail)
	if d.Policy != "" {
		b = append(b, `,"policy":`...)
		b = strconv.AppendQuote(b, d.Policy)
	}
	if d.RetryAfter > 0 {
		b = append(b, `,"retry_after":`...)
		b = strconv.AppendInt(b, seconds(d.RetryAfter), 10)
	}
	return append(b, "}\n"...)
}

// seconds rounds d up to whole seconds: a client told to come back in 0
// seconds comes back too early and is refused again.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second) // never d + time.Second - 1: it overflows near MaxInt64
	if d%time.Second != 0 {
		s++
	}
	return s
}

// planFields are the field values of the plans a protector decides under,
// made once per plan: a Decision points at them, as it points at the
// protector's own, so that it holds one pointer for either. A fixed set
// of slots, probed from a hash of the plan's pointer and read without a
// lock; a slot once taken keeps its plan for the protector's life, so a
// plan's values are made on its first request and found on every other.
// A protector that meets more plans than there are slots (a ConsumerFunc
// that makes a Plan per request) makes the values of the others anew on
// each decision: one small allocation, beside NewPlan's own.
type planFields struct {
	seed  maphash.Seed
	slots [64]atomic.Pointer[headerValues]
}

// of returns the field values of plan.
func (c *planFields) of(plan *Plan) *headerValues {
	start := maphash.Comparable(c.seed, plan) % uint64(len(c.slots))
	var made *headerValues
	for i := range uint64(len(c.slots)) {
		s := &c.slots[(start+i)%uint64(len(c.slots))]
		hv := s.Load()
		if hv == nil {
			if made == nil {
				made = &headerValues{name: plan.Spec(0).Name, policy: plan.PolicyField(), plan: plan}
			}
			if s.CompareAndSwap(nil, made) {
				return made
			}
			hv = s.Load() // another plan took it first
		}
		if hv.plan == plan {
			return hv
		}
	}
	if made == nil {
		made = &headerValues{name: plan.Spec(0).Name, policy: plan.PolicyField(), plan: plan}
	}
	return made
}
