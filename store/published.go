package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Published limits: each namespace's Limits as its protectors publish
// them (Space.Publish), so that protectctl shows the numbers the service
// enforces rather than its own defaults, and so that a store can refuse a
// second binding of a namespace to other numbers.

// ErrLimitsDiffer is returned by Store.Space for a Namespace the store has
// already bound to other Limits.
var ErrLimitsDiffer = errors.New("protect: one namespace, two sets of limits")

// LimitsDiffer returns the error Store.Space gives when it is asked to
// bind namespace ns to lim after it bound it to bound (when ok): nil when
// ok is false or the two are equal, else an error that wraps
// ErrLimitsDiffer and names the fields that differ.
func LimitsDiffer(ns string, bound Limits, ok bool, lim Limits) error {
	if !ok || bound == lim {
		return nil
	}
	was, now := bound.Diff(lim)
	return fmt.Errorf("%w: namespace %q counts with %s; a second space asks for %s (give each protector its own Namespace; bans are shared through BanNamespace)",
		ErrLimitsDiffer, ns, was, now)
}

// Diff describes the fields in which a and b differ, as a and as b:
// "TTL 10s, BanLimit 1000" and "TTL 1m0s, BanLimit 500".
func (a Limits) Diff(b Limits) (as, bs string) {
	var x, y []string
	add := func(name string, va, vb any) {
		x = append(x, fmt.Sprintf("%s %v", name, va))
		y = append(y, fmt.Sprintf("%s %v", name, vb))
	}
	if a.MaxRequests != b.MaxRequests {
		add("MaxRequests", a.MaxRequests, b.MaxRequests)
	}
	if a.TTL != b.TTL {
		add("TTL", a.TTL, b.TTL)
	}
	if a.BanLimit != b.BanLimit {
		add("BanLimit", a.BanLimit, b.BanLimit)
	}
	if a.BanDuration != b.BanDuration {
		add("BanDuration", a.BanDuration, b.BanDuration)
	}
	if a.BanFactor != b.BanFactor {
		add("BanFactor", a.BanFactor, b.BanFactor)
	}
	if a.MaxBanDuration != b.MaxBanDuration {
		add("MaxBanDuration", a.MaxBanDuration, b.MaxBanDuration)
	}
	if a.OffenseWindow != b.OffenseWindow {
		add("OffenseWindow", a.OffenseWindow, b.OffenseWindow)
	}
	if a.BanReason != b.BanReason {
		add("BanReason", strconv.Quote(a.BanReason), strconv.Quote(b.BanReason))
	}
	return strings.Join(x, ", "), strings.Join(y, ", ")
}
