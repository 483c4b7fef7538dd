package store

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// A plan holds a consumer to several limits at once: token buckets
// (Rate) and calendar quotas (Quota). The stores decide every limit of a
// plan in one atomic step, all or nothing; the arithmetic they share is
// here, so that the memory store and Redis answer alike.
//
// Times are whole microseconds since the Unix epoch: Redis' TIME has that
// resolution, and a double (Redis Lua's only number) holds such a time,
// plus a 100-year bucket, exactly. A token bucket is GCRA: one
// theoretical arrival time (TAT) per consumer and rate, kept as a whole
// number of microseconds plus a remainder in units of 1/Limit µs, so that
// an emission interval of Period/Limit that is not a whole number of
// microseconds (2^32 per hour is 0.838µs) is still counted exactly.

// MaxPlanLimits is the most limits one Plan may hold. The stores report
// every limit's state in a fixed array of this size, so that deciding a
// plan allocates nothing.
const MaxPlanLimits = 8

// maxPlanValue bounds a limit, a burst and a cost that can ever fit: the
// Redis script adds remainders below 2 × Limit and must stay within the
// 2^53 integers a double holds exactly.
const maxPlanValue = 1 << 50

// maxPlanSpan bounds a rate's period and the time a full bucket takes to
// refill: a TAT stays below 2^53 µs for centuries.
const maxPlanSpan = 100 * 365 * 24 * time.Hour

// ErrPlan is wrapped by every error of NewPlan and ParsePlans.
var ErrPlan = errors.New("protect: bad plan")

// ErrCostTooHigh is wrapped by Decision.Err when a request costs more than
// a limit of its plan can ever hold (more than a Rate's Burst or a
// Quota's Limit): it is refused, charged nothing, and given no
// Retry-After, since waiting would not help.
var ErrCostTooHigh = errors.New("protect: cost above what the plan's limit holds")

var errNoPlan = errors.New("protect: no plan")

// CheckTakePlan checks what a store's TakePlan is given: a key, a plan
// made by NewPlan, a cost that is not negative. A store's TakePlan calls
// it first.
func CheckTakePlan(k Key, plan *Plan, cost int64) error {
	if plan != nil && len(plan.limits) > 0 && cost >= 0 && (k.Name != "" || k.Prefix.IsValid()) { // the common case; fields read in place, k not copied
		return nil
	}
	return badTakePlan(k, plan, cost)
}

// badTakePlan is CheckTakePlan's error.
func badTakePlan(k Key, plan *Plan, cost int64) error {
	switch {
	case k.IsZero():
		return ErrEmptyKey
	case plan == nil || len(plan.limits) == 0:
		return errNoPlan
	case cost < 0:
		return fmt.Errorf("protect: cost %d: must not be negative", cost)
	}
	return nil
}

// A PlanLimit is one limit of a Plan: a Rate or a Quota. The interface is
// sealed; a nil PlanLimit is rejected by NewPlan.
type PlanLimit interface {
	isPlanLimit()
}

// Rate is a token bucket, computed as GCRA: Limit requests per Period on
// average, and after a quiet spell up to Burst at once. A refused request
// takes no token. A rolling window ("1000 per 24h") is a Rate whose Burst
// is its Limit.
//
// The zero Rate is not a limit: NewPlan rejects a zero Limit or Period.
type Rate struct {
	// Name identifies the limit in the plan, in the RateLimit fields and
	// in the store ["rate-<Limit>-per-<Period>", e.g. "rate-5-per-1s"]. It
	// must be an RFC 9651 key: lower-case letters, digits, '_', '-', '.'
	// and '*', starting with a letter or '*', at most 64 bytes. A limit
	// keeps its state by name when a consumer changes plans.
	Name string
	// Limit is the number of requests per Period; at least 1.
	Limit int64
	// Period is the time Limit requests take on average; positive, a whole
	// number of microseconds, at most 100 years.
	Period time.Duration
	// Burst is how many requests a full bucket serves at once [Limit].
	Burst int64
}

// Quota is a number of requests per calendar window in UTC: each hour,
// day or month. It resets at the window's boundary (months have their own
// lengths), and a request refused by it is told to come back then.
//
// The zero Quota is not a limit: NewPlan rejects a zero Limit or Period.
type Quota struct {
	// Name identifies the limit, as Rate.Name does [the period: "hourly",
	// "daily" or "monthly"]. A consumer moved to another plan keeps its
	// usage of a quota of the same name and period.
	Name string
	// Limit is the number of requests per window; at least 1.
	Limit int64
	// Period is the calendar window: Hourly, Daily or Monthly.
	Period QuotaPeriod
}

func (Rate) isPlanLimit()  {}
func (Quota) isPlanLimit() {}

// QuotaPeriod is the calendar window of a Quota. The zero value is no
// period: NewPlan rejects it.
type QuotaPeriod uint8

const (
	// Hourly windows start at every full hour, UTC.
	Hourly QuotaPeriod = iota + 1
	// Daily windows start at midnight UTC.
	Daily
	// Monthly windows start on the first of each month, 00:00 UTC.
	Monthly
)

var quotaPeriodNames = [...]string{"", "hourly", "daily", "monthly"}

// String returns "hourly", "daily" or "monthly".
func (q QuotaPeriod) String() string {
	if q >= Hourly && q <= Monthly {
		return quotaPeriodNames[q]
	}
	return "QuotaPeriod(" + strconv.Itoa(int(q)) + ")"
}

// ParseQuotaPeriod parses "hourly", "daily" or "monthly", in any case.
func ParseQuotaPeriod(s string) (QuotaPeriod, error) {
	for q := Hourly; q <= Monthly; q++ {
		if strings.EqualFold(s, quotaPeriodNames[q]) {
			return q, nil
		}
	}
	return 0, fmt.Errorf("protect: quota period %q: want hourly, daily or monthly", s)
}

// nominal is the window's length as the RateLimit-Policy field states it:
// a month is 30 days there, though each window runs to the real boundary.
func (q QuotaPeriod) nominal() time.Duration {
	switch q {
	case Hourly:
		return time.Hour
	case Daily:
		return 24 * time.Hour
	}
	return 30 * 24 * time.Hour
}

// WindowEnd returns the end of the window holding now, both in µs since
// the Unix epoch, UTC.
func (q QuotaPeriod) WindowEnd(now int64) int64 {
	const hour, day = int64(time.Hour / time.Microsecond), int64(24 * time.Hour / time.Microsecond)
	switch q {
	case Hourly:
		return floorDiv(now, hour)*hour + hour
	case Daily:
		return floorDiv(now, day)*day + day
	}
	y, m, _ := time.UnixMicro(now).UTC().Date()
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
}

// WindowName names the window that ends at end (µs since the Unix
// epoch): "2026-11-30T12", "2026-11-30" or "2026-11", as Space.Inspect
// reports it in LimitUsage.Window.
func (q QuotaPeriod) WindowName(end int64) string {
	t := time.UnixMicro(end - 1).UTC()
	switch q {
	case Hourly:
		return t.Format("2006-01-02T15")
	case Daily:
		return t.Format("2006-01-02")
	}
	return t.Format("2006-01")
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// A Plan is a set of limits a consumer is held to at once: a request is
// served only if every limit admits it, and only then is it charged, to
// every limit. Make one with NewPlan; it is immutable and safe to share.
// A nil *Plan holds nobody to anything: VerifyConsumer refuses it.
type Plan struct {
	name   string
	limits []planLimit
	// policy is the RateLimit-Policy field value, made once, as
	// http.Header holds it.
	policy []string
}

// planLimit is one limit of a plan, validated, with what deciding it
// needs computed once.
type planLimit struct {
	LimitSpec           // its name, quota (0: a rate), limit, capacity and window, as Spec reports them
	burst     int64     // rates: the bucket's capacity
	period    int64     // rates: µs
	q1, r1    int64     // rates: Period/Limit, the cost of one request: q1 µs + r1/Limit µs
	invPeriod float64   // rates: 1/Period, to estimate left's quotient
	tq, tr    int64     // rates: Burst×Period/Limit, the bucket's depth, in the same form
	public    PlanLimit // as NewPlan completed it
}

// NewPlan checks a plan's limits once and returns the plan. Empty names
// get their defaults; a bad limit is an error that wraps ErrPlan and
// quotes the plan and the limit. A plan has 1 to MaxPlanLimits limits.
func NewPlan(name string, limits ...PlanLimit) (*Plan, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: plan %q: "+format, append([]any{ErrPlan, name}, args...)...)
	}
	if name == "" {
		return nil, bad("a plan needs a name")
	}
	if len(limits) == 0 {
		return nil, bad("no limits (a plan that limits nothing is a mistake, not a plan)")
	}
	if len(limits) > MaxPlanLimits {
		return nil, bad("%d limits: at most %d", len(limits), MaxPlanLimits)
	}
	p := &Plan{name: name, limits: make([]planLimit, len(limits))}
	seen := make(map[string]int, len(limits))
	for i, pl := range limits {
		l, err := newPlanLimit(pl)
		if err != nil {
			return nil, bad("limit %d %s: %w", i+1, describeLimit(pl), err)
		}
		if j, dup := seen[l.Name]; dup {
			return nil, bad("limits %d and %d are both named %q: names must be unique in a plan", j+1, i+1, l.Name)
		}
		seen[l.Name] = i
		p.limits[i] = l
	}
	p.prepare()
	return p, nil
}

// describeLimit quotes a limit as it was given, for errors.
func describeLimit(pl PlanLimit) string {
	switch l := pl.(type) {
	case Rate:
		return fmt.Sprintf("(rate %q: %d per %v, burst %d)", l.Name, l.Limit, l.Period, l.Burst)
	case Quota:
		return fmt.Sprintf("(quota %q: %d %v)", l.Name, l.Limit, l.Period)
	case *Rate:
		if l != nil {
			return describeLimit(*l)
		}
	case *Quota:
		if l != nil {
			return describeLimit(*l)
		}
	}
	return fmt.Sprintf("(%T)", pl)
}

func newPlanLimit(pl PlanLimit) (planLimit, error) {
	switch l := pl.(type) {
	case Rate:
		return newRate(l)
	case Quota:
		return newQuota(l)
	case *Rate:
		if l != nil {
			return newRate(*l)
		}
	case *Quota:
		if l != nil {
			return newQuota(*l)
		}
	}
	return planLimit{}, errors.New("not a Rate or a Quota")
}

func newRate(r Rate) (planLimit, error) {
	if r.Limit < 1 || r.Limit > maxPlanValue {
		return planLimit{}, fmt.Errorf("Limit %d: want 1 to %d", r.Limit, int64(maxPlanValue))
	}
	if r.Period <= 0 {
		return planLimit{}, fmt.Errorf("Period %v: must be positive", r.Period)
	}
	if r.Period%time.Microsecond != 0 {
		return planLimit{}, fmt.Errorf("Period %v: must be a whole number of microseconds", r.Period)
	}
	if r.Period > maxPlanSpan {
		return planLimit{}, fmt.Errorf("Period %v: longer than 100 years", r.Period)
	}
	if r.Burst < 0 || r.Burst > maxPlanValue {
		return planLimit{}, fmt.Errorf("Burst %d: want 0 (the Limit) to %d", r.Burst, int64(maxPlanValue))
	}
	if r.Burst == 0 {
		r.Burst = r.Limit
	}
	if r.Name == "" {
		r.Name = "rate-" + strconv.FormatInt(r.Limit, 10) + "-per-" + shortDuration(r.Period)
	}
	if err := CheckLimitName(r.Name); err != nil {
		return planLimit{}, err
	}
	l := planLimit{LimitSpec: LimitSpec{Name: r.Name, Limit: r.Limit, Capacity: r.Burst, Window: r.Period}, burst: r.Burst, period: r.Period.Microseconds(), public: r}
	l.q1, l.r1 = l.period/l.Limit, l.period%l.Limit
	l.invPeriod = 1 / float64(l.period)
	tq, tr, ok := GCRASplit(l.burst, l.period, l.Limit, int64(maxPlanSpan/time.Microsecond))
	if !ok {
		return planLimit{}, fmt.Errorf("Burst %d × Period %v / Limit %d: a bucket deeper than 100 years", r.Burst, r.Period, r.Limit)
	}
	l.tq, l.tr = tq, tr
	return l, nil
}

func newQuota(q Quota) (planLimit, error) {
	if q.Limit < 1 || q.Limit > maxPlanValue {
		return planLimit{}, fmt.Errorf("Limit %d: want 1 to %d", q.Limit, int64(maxPlanValue))
	}
	if q.Period < Hourly || q.Period > Monthly {
		return planLimit{}, fmt.Errorf("Period %v: want Hourly, Daily or Monthly", q.Period)
	}
	if q.Name == "" {
		q.Name = q.Period.String()
	}
	if err := CheckLimitName(q.Name); err != nil {
		return planLimit{}, err
	}
	return planLimit{LimitSpec: LimitSpec{Name: q.Name, Quota: q.Period, Limit: q.Limit, Capacity: q.Limit, Window: q.Period.nominal()}, public: q}, nil
}

// CheckLimitName accepts an RFC 9651 key of at most 64 bytes, as a
// limit's name and a policy name must be. Such a
// name needs no escaping in a header field, and holds neither ':' nor a
// brace, so it cannot move or confuse a Redis key.
func CheckLimitName(s string) error {
	ok := len(s) > 0 && len(s) <= 64 && (s[0] >= 'a' && s[0] <= 'z' || s[0] == '*')
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("_-.*", c) >= 0
	}
	if !ok {
		return fmt.Errorf("name %q: want an RFC 9651 key of at most 64 bytes (a-z, 0-9, _ - . *, starting with a letter or *)", s)
	}
	return nil
}

// shortDuration writes d in its largest whole unit: 1s, 90s, 15m, 1d.
func shortDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(d.Microseconds(), 10) + "us"
}

// prepare computes what every request under p reuses: the
// RateLimit-Policy field.
func (p *Plan) prepare() {
	var pol []byte
	for i := range p.limits {
		l := &p.limits[i]
		if i > 0 {
			pol = append(pol, ", "...)
		}
		pol = append(pol, '"')
		pol = append(pol, l.Name...)
		pol = append(pol, `";q=`...)
		pol = strconv.AppendInt(pol, l.Limit, 10)
		pol = append(pol, ";w="...)
		pol = strconv.AppendInt(pol, int64((l.Window+time.Second-1)/time.Second), 10) // a window is at most 100 years: no overflow
	}
	p.policy = []string{string(pol)}
}

// Name returns the plan's name.
func (p *Plan) Name() string { return p.name }

// String returns the plan as its RateLimit-Policy field states it,
// after its name: pro: "burst";q=10;w=1, "monthly";q=100000;w=2592000.
func (p *Plan) String() string { return p.name + ": " + p.policy[0] }

// Limits returns the plan's limits in order, as NewPlan completed them:
// every name set, every Burst filled in.
func (p *Plan) Limits() []PlanLimit {
	out := make([]PlanLimit, len(p.limits))
	for i := range p.limits {
		out[i] = p.limits[i].public
	}
	return out
}

// Policy returns the RateLimit-Policy field value of the plan: every limit
// as "<name>";q=<Limit>;w=<seconds>, w being a rate's Period or a quota's
// nominal window (a month is 2592000 seconds there).
func (p *Plan) Policy() string { return p.policy[0] }

// PolicyField returns Policy as the one value of an http.Header field,
// shared by every caller so that writing it allocates nothing: replace
// it (Header.Set), never modify it.
func (p *Plan) PolicyField() []string { return p.policy }

// Len returns the number of limits of p.
func (p *Plan) Len() int { return len(p.limits) }

// A LimitSpec describes one limit of a plan as responses state it. The
// zero LimitSpec is no limit.
type LimitSpec struct {
	Name     string
	Quota    QuotaPeriod   // the quota's period; 0 for a rate
	Limit    int64         // a rate's requests per Period, a quota's per window
	Capacity int64         // the most one request may cost: a rate's Burst, a quota's Limit
	Window   time.Duration // a rate's Period, a quota's nominal window (a month is 30 days)
}

// Spec describes p's i-th limit. The LimitSpec is the plan's own, shared
// by every caller: read it, never change it.
func (p *Plan) Spec(i int) *LimitSpec { return &p.limits[i].LimitSpec }

// Has reports whether p has a limit named name.
func (p *Plan) Has(name string) bool {
	for i := range p.limits {
		if p.limits[i].Name == name {
			return true
		}
	}
	return false
}

// Decide returns the outcome of p's i-th limit for a request of cost at
// now (µs since the Unix epoch, by the store's clock), from the state a
// store holds for it (held, as LimitOutcome describes its A and B; ok
// false when it holds none of this limit's kind). A state that no longer
// matters (a rate's TAT in the past, a quota's window over) counts as
// none. Cost 0 decides a request of cost 1. The outcome's A and B are the
// current state, for Charge and PlanResult.Fill.
func (p *Plan) Decide(i int, now, cost int64, held LimitOutcome, ok bool) LimitOutcome {
	l := &p.limits[i]
	c := max(cost, 1)
	if l.Quota != 0 {
		r := LimitOutcome{}
		if ok && held.B > now {
			r.A, r.B = held.A, held.B
		} else {
			r.B = l.Quota.WindowEnd(now)
		}
		r.Fits = c <= l.Limit-r.A
		return r
	}
	r := LimitOutcome{A: now}
	if ok && held.A >= now {
		r.A, r.B = held.A, held.B
	}
	if q, rr, never := l.inc(c); !never {
		r.Fits, _, _ = l.rateFits(now, r.A, r.B, q, rr)
	}
	return r
}

// Charge returns the state p's i-th limit is left in when the request
// Decide admitted with o is charged cost at now.
func (p *Plan) Charge(i int, now, cost int64, o LimitOutcome) LimitOutcome {
	l := &p.limits[i]
	if l.Quota != 0 {
		o.A += cost
		return o
	}
	q, r, _ := l.inc(cost)
	_, o.A, o.B = l.rateFits(now, o.A, o.B, q, r)
	return o
}

// inc returns the increment of TAT for a request of cost c under rate l,
// as q µs + r/Limit µs; never reports a cost above the burst, which no
// bucket can ever hold.
func (l *planLimit) inc(c int64) (q, r int64, never bool) {
	switch {
	case c <= 1:
		return l.q1, l.r1, false
	case c > l.burst:
		return 0, 0, true
	}
	// c × Period / Limit is at most the bucket's depth, which fits.
	q, r, _ = GCRASplit(c, l.period, l.Limit, math.MaxInt64)
	return q, r, false
}

// rateFits is GCRA for rate l at now (µs): the bucket's TAT is tat µs +
// rem/Limit µs (a TAT in the past is a full bucket), and a request adds
// inc. It returns whether the request fits, and the TAT it leaves if
// charged. lua/plan.lua computes the same, in the same integers.
func (l *planLimit) rateFits(now, tat, rem, incQ, incR int64) (fits bool, ntat, nrem int64) {
	if tat < now {
		tat, rem = now, 0
	}
	rem = min(rem, l.Limit-1) // a remainder stored under another Limit
	// rem and incR are below Limit: the carry is 0 or 1, and a compare
	// is much cheaper than a division.
	ntat, nrem = tat+incQ, rem+incR
	if nrem >= l.Limit {
		ntat, nrem = ntat+1, nrem-l.Limit
	}
	// It fits when the new TAT is at most the bucket's depth ahead of now.
	d := ntat - l.tq - now
	return d < 0 || d == 0 && nrem <= l.tr, ntat, nrem
}

// A LimitOutcome is one limit's outcome as a store computes it, for
// PlanResult.Fill: whether a request of the cost (1 for cost 0) fits, and
// the state the limit is left in — a rate's theoretical arrival time (A,
// in µs since the Unix epoch by the store's clock) and its remainder (B,
// in 1/Limit µs), or a quota's count (A) and the end of its window (B, in
// µs). The state is the new one when the plan was charged, else the
// current one. The zero LimitOutcome does not fit.
type LimitOutcome struct {
	Fits bool
	A, B int64
}

// LimitState is what one limit of a plan says about one request. The zero
// LimitState admits with nothing left. It is three words, and a
// PlanResult holds MaxPlanLimits of them: every byte of it is copied on
// every request.
type LimitState struct {
	// Remaining is how many requests of cost 1 the limit would still admit
	// now, after this one if it was charged.
	Remaining int64
	// Reset is the time until the limit is whole again: a rate's bucket
	// full, a quota's window over.
	Reset time.Duration
	// RetryAfter is zero when the limit admits the request; else the
	// time until its cost fits (at least 1µs), or negative when it never
	// will (the cost is above the Burst or the quota's Limit).
	RetryAfter time.Duration
}

// Refused reports whether this limit refuses the request.
func (s *LimitState) Refused() bool { return s.RetryAfter != 0 }

// PlanResult is the outcome of Space.TakePlan. It holds no pointers but
// Result's ban, so a store fills it in place without allocating. The zero
// PlanResult is a request neither banned nor refused, decided by the
// plan's first limit.
type PlanResult struct {
	// Result reports the bans, as Take does, and with a stream the
	// stream's count. When Banned or Allowed the plan was not looked at.
	Result
	// Charged reports that every limit was charged the request's cost.
	Charged bool
	// Decider is the index, in the plan, of the limit that decided: of
	// those that refused, the one with the longest RetryAfter (waiting it
	// out satisfies every other); when every limit admitted, the one with
	// the least left. -1 when a ban or the allowlist decided.
	Decider int
	// Limits holds each limit's state, in the plan's order.
	Limits [MaxPlanLimits]LimitState
}

// Refused reports whether a ban or a limit refused the request.
func (r *PlanResult) Refused() bool {
	return r.Banned() || r.Decider >= 0 && r.Limits[r.Decider].Refused()
}

// Fill sets r's Limits, Charged and Decider from the outcome of each
// limit of plan (out, in the plan's order), as every store reports them:
// now is the store's time in µs since the Unix epoch, cost the request's
// cost. A store's TakePlan calls it once it knows the outcomes, so that
// every store states a limit in the same numbers.
func (r *PlanResult) Fill(p *Plan, now, cost int64, raw *[MaxPlanLimits]LimitOutcome) {
	all := true
	for i := range p.limits {
		all = all && raw[i].Fits
		r.Limits[i] = p.limits[i].state(now, cost, raw[i])
	}
	r.Charged = all && cost > 0
	r.pickDecider(len(p.limits))
}

// pickDecider sets Decider from the first n limits' states.
func (r *PlanResult) pickDecider(n int) {
	r.Decider = 0
	for i := 1; i < n; i++ {
		st, best := &r.Limits[i], &r.Limits[r.Decider]
		switch {
		case st.Refused() != best.Refused():
			if st.Refused() {
				r.Decider = i
			}
		case st.Refused():
			if (st.RetryAfter < 0) != (best.RetryAfter < 0) {
				if st.RetryAfter < 0 { // never beats any wait
					r.Decider = i
				}
			} else if st.RetryAfter > best.RetryAfter {
				r.Decider = i
			}
		case st.Remaining < best.Remaining:
			r.Decider = i
		}
	}
}

// state reports one limit from a store's raw answer.
func (l *planLimit) state(now, cost int64, raw LimitOutcome) LimitState {
	c := max(cost, 1)
	if l.Quota != 0 {
		st := LimitState{Remaining: max(l.Limit-raw.A, 0), Reset: micros(raw.B - now)}
		if !raw.Fits {
			st.RetryAfter = max(st.Reset, time.Microsecond)
			if c > l.Limit {
				st.RetryAfter = -1
			}
		}
		return st
	}
	tat, rem := raw.A, raw.B
	if tat < now {
		tat, rem = now, 0
	}
	st := LimitState{Remaining: l.left(now, tat, rem), Reset: micros(tat - now)}
	if rem > 0 {
		st.Reset += time.Microsecond
	}
	if !raw.Fits {
		q, r, never := l.inc(c)
		if never {
			st.RetryAfter = -1
			return st
		}
		_, ntat, nrem := l.rateFits(now, tat, rem, q, r)
		wait := ntat - l.tq - now // ≥ 0, as the request did not fit
		if nrem > l.tr {
			wait++
		}
		st.RetryAfter = micros(max(wait, 1))
	}
	return st
}

// left is how many requests of cost 1 a bucket with TAT tat+rem/Limit
// admits at now: floor(N / Period) with N = (now − TAT + depth) × Limit,
// in 128 bits. A 128-bit division costs more than the rest of a decision,
// so the quotient is estimated in floating point and made exact by
// multiplying back. N is below 2^103 and the quotient below 2^51, so the
// estimate is off by at most one for a Period of 4µs or more; a shorter
// one may take the exact division.
func (l *planLimit) left(now, tat, rem int64) int64 {
	a := now - tat + l.tq              // whole µs of room
	if a < 0 || a == 0 && l.tr < rem { // no room, or less than none
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(l.Limit))
	var carry uint64
	lo, carry = bits.Add64(lo, uint64(l.tr), 0)
	hi += carry
	lo, carry = bits.Sub64(lo, uint64(rem), 0)
	hi -= carry
	if hi >= uint64(l.period) { // a quotient of 2^64 or more: never a live bucket's
		return l.burst
	}
	// hi is below period and lo>>1 below 2^63, so both convert as signed
	// integers: on amd64 one instruction each, where an unsigned
	// conversion branches (arm64 converts either in one). lo loses its
	// last bit, which moves the estimate by 1/Period at most.
	x := (float64(int64(hi))*0x1p64 + float64(int64(lo>>1))*2) * l.invPeriod
	n := uint64(l.burst) + 1
	if x < float64(n) {
		n = uint64(int64(x))
	}
	switch {
	case n > 0 && !mulLE(n, uint64(l.period), hi, lo):
		n--
	case mulLE(n+1, uint64(l.period), hi, lo):
		n++
	}
	// The estimate is off by one at most for any state a store wrote
	// under a Period of 4µs or more; anything else (a corrupt record, and
	// maybe a shorter Period) gets the exact, slow answer.
	if n > 0 && !mulLE(n, uint64(l.period), hi, lo) || mulLE(n+1, uint64(l.period), hi, lo) {
		n, _ = bits.Div64(hi, lo, uint64(l.period))
	}
	return min(int64(n), l.burst)
}

// mulLE reports whether x × y ≤ hi:lo, in 128 bits.
func mulLE(x, y, hi, lo uint64) bool {
	ph, pl := bits.Mul64(x, y)
	return ph < hi || ph == hi && pl <= lo
}

// micros converts µs to a Duration, never negative.
func micros(us int64) time.Duration {
	if us <= 0 {
		return 0
	}
	return time.Duration(us) * time.Microsecond
}

// LimitUsage is what a store holds for one limit of a key's plans, as
// Space.Inspect reports it. The zero value is a rate with a full bucket.
type LimitUsage struct {
	// Name is the limit's name.
	Name string
	// Period is the quota's window; zero for a rate.
	Period QuotaPeriod
	// Window names a quota's current window: "2026-11-30T12" (hourly),
	// "2026-11-30" (daily) or "2026-11" (monthly). Empty for a rate.
	Window string
	// Used is what a quota counted in its window. Zero for a rate.
	Used int64
	// Reset is, for a quota, the time until its window ends; for a rate,
	// its backlog: the time until its bucket is full again.
	Reset time.Duration
}

// Left returns what is left of u under p: the requests of cost 1 that p's
// limit of the same name and kind would admit now. ok is false when p has
// no such limit.
func (p *Plan) Left(u LimitUsage) (left int64, ok bool) {
	for i := range p.limits {
		l := &p.limits[i]
		if l.Name != u.Name || l.Quota != u.Period {
			continue
		}
		if l.Quota != 0 {
			return max(l.Limit-u.Used, 0), true
		}
		backlog := int64((u.Reset + time.Microsecond - 1) / time.Microsecond)
		return l.left(0, backlog, 0), true
	}
	return 0, false
}
