package storetest

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/httpprotect/protect/store"
)

// How the suite checks a time a store reports. A store reads its clock
// inside each call, at a moment the suite cannot see. With a fake clock
// (Env.Now) that moment is the clock's time during the call, and every
// time is exact. On real time a call's span bounds it: it is no later
// than the real time after the call, and no earlier than the store's own
// clock just before the call, as the Created of a ban it writes then
// tells it (a store's clock may lag the real time by more than any fixed
// allowance: the memory store's coarse clock does under load), or than
// the real time before the call less Env.Lag, whichever is earlier. A
// time the store computes from two of its clock reads, or from one and a
// calendar, is then checked against the bounds the spans give: as wide
// as the calls took and the clock lagged, no wider.

// A span bounds the moment a store read its clock during one call.
type span struct{ from, to time.Time }

// storeNow is the store's clock as it tells it: the Created of a ban it
// writes in a namespace of the suite's own.
func (env *Env) storeNow(t *testing.T) time.Time {
	t.Helper()
	if env.probe == nil {
		env.probe = env.scoped(t, "clock:", "clock:", limits(env.Unit))
	}
	b := addBan(t, env.probe, store.Ban{Key: store.Key{Name: "storetest-clock"}, Source: store.SourceManual, Reason: "the suite reads the store's clock"}, 0)
	return b.Created.UTC()
}

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
func (env *Env) timed(t *testing.T, f func()) span {
	t.Helper()
	if env.Now != nil {
		from := env.now()
		f()
		return span{from, env.now()}
	}
	store := env.storeNow(t).Truncate(time.Microsecond) // a plan's clock is in whole µs
	from := env.now().Add(-env.Lag)
	f()
	return span{minTime(from, store), env.now()}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
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

// plus widens b by d's bounds.
func (b bound) plus(d bound) bound { return bound{b.lo + d.lo, b.hi + d.hi} }

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
func untilEnd(p store.QuotaPeriod, b span) bound {
	end := windowEnd(p, b.to)
	return bound{end.Sub(b.to), end.Sub(b.from)}
}

// windowEnd is the end of the calendar window holding now, by the time
// package (the stores compute it their own way).
func windowEnd(p store.QuotaPeriod, now time.Time) time.Time {
	now = now.UTC()
	y, m, d := now.Date()
	switch p {
	case store.Hourly:
		return now.Truncate(time.Hour).Add(time.Hour)
	case store.Daily:
		return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}

// awayFromEnd returns at once on a fake clock; on real time, when the
// window of period p ends within the next few seconds, it waits until
// that end has passed for a lagging clock too, so that a test's requests
// fall in one window.
func (env *Env) awayFromEnd(p store.QuotaPeriod) {
	if env.Now != nil {
		return
	}
	now := env.now()
	if left := windowEnd(p, now).Sub(now); left < time.Second+10*env.Unit {
		time.Sleep(left + env.Lag + time.Millisecond)
	}
}

// reach returns at once on a fake clock; on real time it waits until the
// store's clock is at least d past its read in since, however it lags.
func (env *Env) reach(t *testing.T, since span, d time.Duration) {
	t.Helper()
	if env.Now != nil {
		return
	}
	for env.storeNow(t).Before(since.to.Add(d)) {
		time.Sleep(time.Millisecond)
	}
}

// takePlanTimed calls sp.TakePlan as takePlan does, and returns the span
// of the store's clock read.
func (env *Env) takePlanTimed(t *testing.T, sp store.Space, k store.Key, a netip.Addr, plan *store.Plan, cost int64, stream bool) (store.PlanResult, span) {
	t.Helper()
	var r store.PlanResult
	s := env.timed(t, func() { r = takePlan(t, sp, k, a, plan, cost, stream) })
	return r, s
}

// limitsOf is r's limits of plan, for failure messages: the rest of the
// array is zero.
func limitsOf(r store.PlanResult, plan *store.Plan) []store.LimitState {
	return r.Limits[:len(plan.Limits())]
}

// planResult formats r for a failure message.
func planResult(r store.PlanResult, plan *store.Plan) string {
	return fmt.Sprintf("{Banned:%v NewBan:%v Count:%d BanLeft:%v Charged:%v Decider:%d Limits:%+v}",
		r.Banned(), r.NewBan, r.Count, r.BanLeft, r.Charged, r.Decider, limitsOf(r, plan))
}
