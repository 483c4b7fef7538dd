package protect

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Published limits: each namespace's Limits as its protectors publish
// them (Space.Publish), so that protectctl shows the numbers the service
// enforces rather than its own defaults, and so that a store can refuse a
// second binding of a namespace to other numbers.

// ErrLimitsDiffer is returned by Store.Space for a Namespace the store has
// already bound to other Limits.
var ErrLimitsDiffer = errors.New("protect: one namespace, two sets of limits")

// bindLimits checks scope's Limits against those the namespace was first
// bound to (bound, when ok), and returns the error Store.Space gives when
// they differ.
func bindLimits(ns string, bound Limits, ok bool, lim Limits) error {
	if !ok || bound == lim {
		return nil
	}
	was, now := bound.diff(lim)
	return fmt.Errorf("%w: namespace %q counts with %s; a second space asks for %s (give each protector its own Namespace; bans are shared through BanNamespace)",
		ErrLimitsDiffer, ns, was, now)
}

// diff describes the fields in which a and b differ, as a and as b.
func (a Limits) diff(b Limits) (as, bs string) {
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

// publishedRecord is Limits as the Redis store keeps them at
// <namespace>limits: JSON, readable with redis-cli, times in ms.
type publishedRecord struct {
	MaxRequests    int64   `json:"max_requests"`
	TTL            int64   `json:"ttl_ms"`
	BanLimit       int64   `json:"ban_limit"`
	BanDuration    int64   `json:"ban_duration_ms"`
	BanFactor      float64 `json:"ban_factor"`
	MaxBanDuration int64   `json:"max_ban_duration_ms"`
	OffenseWindow  int64   `json:"offense_window_ms"`
	BanReason      string  `json:"ban_reason,omitempty"`
}

func encodeLimits(l Limits) string {
	b, _ := json.Marshal(publishedRecord{ // a struct of numbers and a string: cannot fail
		MaxRequests: l.MaxRequests, TTL: l.TTL.Milliseconds(), BanLimit: l.BanLimit,
		BanDuration: l.BanDuration.Milliseconds(), BanFactor: l.BanFactor,
		MaxBanDuration: l.MaxBanDuration.Milliseconds(), OffenseWindow: l.OffenseWindow.Milliseconds(),
		BanReason: l.BanReason,
	})
	return string(b)
}

func decodeLimits(s string) (Limits, error) {
	var r publishedRecord
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return Limits{}, fmt.Errorf("malformed published limits %q: %w", s, err)
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return Limits{
		MaxRequests: r.MaxRequests, TTL: ms(r.TTL), BanLimit: r.BanLimit,
		BanDuration: ms(r.BanDuration), BanFactor: r.BanFactor,
		MaxBanDuration: ms(r.MaxBanDuration), OffenseWindow: ms(r.OffenseWindow),
		BanReason: r.BanReason,
	}, nil
}
