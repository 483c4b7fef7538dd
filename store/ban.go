package store

import (
	"cmp"
	"math"
	"net/netip"
	"slices"
	"time"
)

// Source says who wrote a ban. The zero value, "", is neither and matches
// both where a filter takes a Source.
type Source string

const (
	// SourceAuto marks a ban written by the pipeline when a stream passed
	// BanLimit. Automatic bans always expire.
	SourceAuto Source = "auto"
	// SourceManual marks a ban an operator added.
	SourceManual Source = "manual"
)

// A Ban is one entry of the block list. The zero Ban bans nothing: a
// store rejects a ban with an empty Key.
type Ban struct {
	Key     Key       // the banned key, or the banned range when Range is set
	Range   bool      // checked against every client address, not one counting key
	Reason  string    // why, in words
	Source  Source    // auto or manual; SourceList in a Blocked decision
	By      string    // who added a manual ban
	Created time.Time // by the store's clock
	Expires time.Time // zero: permanent
	Offense int       // the key's automatic bans within the offense window, this one included
	// Malformed, when not empty, says that the store holds a record at
	// Key that it cannot read, and what is wrong with it (quoting the
	// record). Such a ban refuses nothing (see ErrMalformed): it is
	// listed, inspected and lifted so that an operator can find and
	// remove it, and every other field but Key and Range is zero.
	Malformed string
}

// Permanent reports whether the ban never expires.
func (b Ban) Permanent() bool { return b.Expires.IsZero() }

// Left returns the time until the ban ends at now; zero when permanent or
// over.
func (b Ban) Left(now time.Time) time.Duration {
	if b.Permanent() {
		return 0
	}
	return max(b.Expires.Sub(now), 0)
}

// Covers reports whether b applies to the client address a with counting
// key k.
func (b Ban) Covers(k Key, a netip.Addr) bool {
	if !b.Range {
		return b.Key == k
	}
	return a.IsValid() && b.Key.Prefix.Contains(a)
}

// BanLength returns the length of the n-th automatic ban of a key within
// the offense window: BanDuration × BanFactor^(n−1), capped at
// MaxBanDuration (fail2ban's bantime.increment). n below 1 counts as 1.
//
// The Redis store computes the same length in Lua (redisstore/lua/prelude.lua); the
// Escalation test of package storetest keeps the two equal.
func BanLength(lim *Limits, n int) time.Duration {
	if n < 1 {
		n = 1
	}
	d := float64(lim.BanDuration) * math.Pow(lim.BanFactor, float64(n-1))
	if lim.MaxBanDuration > 0 && (d > float64(lim.MaxBanDuration) || math.IsInf(d, 0) || math.IsNaN(d)) {
		return lim.MaxBanDuration
	}
	if d > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}

// MaxReasonLen is the longest reason a ban records, in bytes: room for a
// sentence and a ticket link, not for a document. Protector.Ban refuses a
// longer one (ErrReasonTooLong), and so do protectctl and the admin API
// through it; CheckBan, which every store's AddBan calls, cuts whatever
// else reaches a store to it, so that no list of bans holds a reason that
// a table, a log line or a Redis record must carry at any length.
const MaxReasonLen = 1024

// BanResult is the Result of a request refused by ban b at now, for a ban
// that ends at end (0: never), both in nanoseconds of the store's own
// clock from an epoch of its choosing (BanLeft is their difference; keep
// the epoch before any ban's end, so that no real end is 0). The Result
// points at b: a store that keeps b unchanged once published hands it
// out without a copy.
func BanResult(b *Ban, end, now int64) Result {
	r := Result{Ban: b}
	if end != 0 {
		r.BanLeft = time.Duration(end - now)
	}
	return r
}

// SortBans orders bans soonest expiry first, permanent bans next, then
// the records a store could not read (Ban.Malformed), each group by key.
func SortBans(bans []Ban) {
	slices.SortFunc(bans, func(a, b Ban) int {
		if c := cmp.Compare(banRank(a), banRank(b)); c != 0 {
			return c
		}
		if c := a.Expires.Compare(b.Expires); c != 0 {
			return c
		}
		return compareKeys(a.Key, b.Key)
	})
}

// banRank is a ban's group in a listing: 0 ends, 1 is permanent, 2 is
// damaged.
func banRank(b Ban) int {
	switch {
	case b.Malformed != "":
		return 2
	case b.Permanent():
		return 1
	}
	return 0
}

func compareKeys(a, b Key) int {
	if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
		return c
	}
	if a.Prefix.Bits() != b.Prefix.Bits() {
		return a.Prefix.Bits() - b.Prefix.Bits()
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}
