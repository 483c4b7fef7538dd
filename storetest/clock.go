package storetest

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/httpprotect/protect"
)

// How the suite checks a time a store reports. A store reads its clock
// inside each call, at a moment the suite cannot see. With a fake clock
// (Env.Now) that moment is the clock's time during the call, and every
// time is exact. On real time a call's span bounds it: from the real time
// before the call, less Env.Lag (a coarse or cached clock lags), to the
// real time after it. A time the store computes from two of its clock
// reads, or from one and a calendar, is then checked against the bounds
// the spans give: as wide as the calls took, and Lag, never wider.

// A span bounds the moment a store read its clock during one call.
type span struct{ from, to time.Time }

// now is the time as the store's clock tells it, as far as the suite can
// know: the fake clock's, or the real one (in UTC, as the calendar
// windows are).
func (env *Env) now() time.Time {
	if env.Now != nil {
		return env.Now().UTC()
	}
	return time.Now().UTC()
}

// timed calls f and returns the span of the store's clock read in it.
func (env *Env) timed(f func()) span {
	from := env.now()
	f()
	return span{from.Add(-env.Lag), env.now()}
}

// elapsed bounds the store's time from its read in a to its read in b:
// time only passes.
func elapsed(a, b span) (lo, hi time.Duration) {
	return max(0, b.from.Sub(a.to)), b.to.Sub(a.from)
}

// A bound is a time the suite expects, from lo to hi; on a fake clock lo
// is hi.
type bound struct{ lo, hi time.Duration }

func (b bound) has(d time.Duration) bool { return b.lo <= d && d <= b.hi }

func (b bound) String() string {
	if b.lo == b.hi {
		return b.lo.String()
	}
	return fmt.Sprintf("%v to %v", b.lo, b.hi)
}

// exact is a time that does not depend on the clock.
func exact(d time.Duration) bound { return bound{d, d} }

// less is d less the store's time from its read in a to its read in b: a
// wait of d that began at a, as b sees it.
func less(d time.Duration, a, b span) bound {
	lo, hi := elapsed(a, b)
	return bound{d - hi, d - lo}
}

// untilEnd is the time from the store's read in b to the end of its
// calendar window of period p, by the time package. The suite keeps its
// quota tests away from a window's end (awayFromEnd), so both ends of b
// lie in one window.
func untilEnd(p protect.QuotaPeriod, b span) bound {
	end := windowEnd(p, b.to)
	return bound{end.Sub(b.to), end.Sub(b.from)}
}

// windowEnd is the end of the calendar window holding now, by the time
// package (the stores compute it their own way).
func windowEnd(p protect.QuotaPeriod, now time.Time) time.Time {
	now = now.UTC()
	y, m, d := now.Date()
	switch p {
	case protect.Hourly:
		return now.Truncate(time.Hour).Add(time.Hour)
	case protect.Daily:
		return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}

// awayFromEnd returns at once on a fake clock; on real time, when the
// window of period p ends within the next few seconds, it waits until
// that end has passed for a lagging clock too, so that a test's requests
// fall in one window.
func (env *Env) awayFromEnd(p protect.QuotaPeriod) {
	if env.Now != nil {
		return
	}
	now := env.now()
	if left := windowEnd(p, now).Sub(now); left < time.Second+10*env.Unit {
		time.Sleep(left + env.Lag + time.Millisecond)
	}
}

// past lets at least d pass as the store's clock tells it: d on a fake
// clock; on real time d and Lag, so that a clock that lagged the real
// time at the start and does not at the end has still seen d.
func (env *Env) past(d time.Duration) {
	env.Wait(d + env.Lag)
}

// takePlanTimed calls sp.TakePlan as takePlan does, and returns the span
// of the store's clock read.
func (env *Env) takePlanTimed(t *testing.T, sp protect.Space, k protect.Key, a netip.Addr, plan *protect.Plan, cost int64, stream bool) (protect.PlanResult, span) {
	t.Helper()
	var r protect.PlanResult
	s := env.timed(func() { r = takePlan(t, sp, k, a, plan, cost, stream) })
	return r, s
}

// limitsOf is r's limits of plan, for failure messages: the rest of the
// array is zero.
func limitsOf(r protect.PlanResult, plan *protect.Plan) []protect.LimitState {
	return r.Limits[:len(plan.Limits())]
}

// planResult formats r for a failure message.
func planResult(r protect.PlanResult, plan *protect.Plan) string {
	return fmt.Sprintf("{Banned:%v NewBan:%v Count:%d BanLeft:%v Charged:%v Decider:%d Limits:%+v}",
		r.Banned, r.NewBan, r.Count, r.BanLeft, r.Charged, r.Decider, limitsOf(r, plan))
}
