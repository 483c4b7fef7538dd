package redisstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	protect "github.com/httpprotect/protect"
)

// The Redis store keeps every ban, on a key or on a range, as one record
// string: "created|expires|offense|source|by|reason", times in Unix
// milliseconds by Redis' clock, expires 0 for a permanent ban. The
// reason comes last, so it may hold '|'; by may not (AddBan replaces it).
// Key bans are strings at <bns>{<key>}:b that expire by themselves (PX),
// each also an entry of the ban index (index.go); range bans are fields
// of one hash, <bns>ranges (bns: the ban namespace). The scripts write
// the records (ban_record in lua/prelude.lua) and decodeBan is the one
// place that reads them.

// decodeBan reads a ban record.
func decodeBan(k protect.Key, isRange bool, rec string) (protect.Ban, error) {
	f := strings.SplitN(rec, "|", 6)
	if len(f) != 6 {
		return protect.Ban{}, fmt.Errorf("malformed ban record %q", rec)
	}
	created, err1 := strconv.ParseInt(f[0], 10, 64)
	expires, err2 := strconv.ParseInt(f[1], 10, 64)
	offense, err3 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return protect.Ban{}, fmt.Errorf("malformed ban record %q: %w", rec, err)
	}
	b := protect.Ban{Key: k, Range: isRange, Created: time.UnixMilli(created).UTC(), Offense: offense,
		Source: protect.Source(f[3]), By: f[4], Reason: f[5]}
	if expires != 0 {
		b.Expires = time.UnixMilli(expires).UTC()
	}
	return b, nil
}

// decodeTake reads the take script's reply: the count when not banned,
// else {count, ms left, new, record}.
func decodeTake(v any, k protect.Key) (protect.Result, error) {
	if n, ok := v.(int64); ok {
		return protect.Result{Count: n}, nil
	}
	a, ok := v.([]any)
	if !ok || len(a) != 4 {
		return protect.Result{}, fmt.Errorf("unexpected reply %v", v)
	}
	count, err1 := toInt(a[0])
	left, err2 := toInt(a[1])
	isNew, err3 := toInt(a[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return protect.Result{}, err
	}
	b, err := decodeBan(k, false, str(a[3]))
	if err != nil {
		return protect.Result{}, err
	}
	r := protect.Result{Count: count, Banned: true, NewBan: isNew == 1, Ban: &b}
	if !b.Permanent() {
		r.BanLeft = time.Duration(left) * time.Millisecond
	}
	return r, nil
}

// decodeRanges reads the ranges script's reply: Redis' time, and the
// range bans it lists. A record that does not decode is skipped and
// reported through skip, so that one bad field cannot hide every ban.
func decodeRanges(v []any, skip func(field string, err error)) (now int64, bans []protect.Ban, err error) {
	if len(v) == 0 || len(v)%2 != 1 {
		return 0, nil, fmt.Errorf("unexpected reply of %d values", len(v))
	}
	if now, err = toInt(v[0]); err != nil {
		return 0, nil, err
	}
	for i := 1; i+1 < len(v); i += 2 {
		field := str(v[i])
		p, err := netip.ParsePrefix(field)
		if err == nil {
			var b protect.Ban
			if b, err = decodeBan(protect.Key{Prefix: p}, true, str(v[i+1])); err == nil {
				bans = append(bans, b)
				continue
			}
		}
		skip(field, err)
	}
	return now, bans, nil
}

// redisBase returns <ns>{<key>}, the base of a key's Redis keys.
func redisBase(ns string, k protect.Key) string {
	var kb [64]byte
	ks, _ := k.AppendText(kb[:0])
	var b strings.Builder
	b.Grow(len(ns) + len(ks) + 2)
	b.WriteString(ns)
	b.WriteByte('{')
	b.Write(ks)
	b.WriteByte('}')
	return b.String()
}

// redisKeys returns a key's three Redis keys: its counter
// <ns>{<key>}:c, its ban <bns>{<key>}:b and its offenses <bns>{<key>}:o,
// cut from one string (one allocation instead of five). The hash tag is
// the key alone, so the three share a cluster slot whatever the
// namespaces.
func redisKeys(ns, bns string, k protect.Key) (counter, ban, offenses string) {
	var kb [64]byte
	ks, _ := k.AppendText(kb[:0])
	var b strings.Builder
	b.Grow(len(ns) + 2*len(bns) + 3*(len(ks)+4))
	for i, suffix := range [...]string{"}:c", "}:b", "}:o"} {
		if i == 0 {
			b.WriteString(ns)
		} else {
			b.WriteString(bns)
		}
		b.WriteByte('{')
		b.Write(ks)
		b.WriteString(suffix)
	}
	all := b.String()
	n, m := len(ns)+len(ks)+4, len(bns)+len(ks)+4 // ns { ks } :x
	return all[:n], all[n : n+m], all[n+m:]
}

func toInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("unexpected %T in reply", v)
}

func str(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

// decodePlan reads the plan script's reply into r: a ban, as the take
// script reports one, or Redis' time in µs, the stream's count, and each
// limit's outcome (fits, a, b) in the plan's order.
func decodePlan(v any, k protect.Key, p *protect.Plan, n int, cost int64, r *protect.PlanResult) error {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		return fmt.Errorf("unexpected reply %v", v)
	}
	kind, err := toInt(a[0])
	if err != nil {
		return err
	}
	if kind == 0 {
		res, err := decodeTake(a[1:], k)
		if err != nil {
			return err
		}
		r.Result, r.Decider = res, -1
		return nil
	}
	if len(a) != 3+3*n {
		return fmt.Errorf("unexpected reply of %d values for %d limits", len(a), n)
	}
	now, err1 := toInt(a[1])
	count, err2 := toInt(a[2])
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	var out [protect.MaxPlanLimits]protect.LimitOutcome
	for i := range n {
		fits, err1 := toInt(a[3+3*i])
		x, err2 := toInt(a[4+3*i])
		y, err3 := toInt(a[5+3*i])
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		out[i] = protect.LimitOutcome{Fits: fits == 1, A: x, B: y}
	}
	r.Count = count
	r.Fill(p, now, cost, &out)
	return nil
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

func encodeLimits(l protect.Limits) string {
	b, _ := json.Marshal(publishedRecord{ // a struct of numbers and a string: cannot fail
		MaxRequests: l.MaxRequests, TTL: l.TTL.Milliseconds(), BanLimit: l.BanLimit,
		BanDuration: l.BanDuration.Milliseconds(), BanFactor: l.BanFactor,
		MaxBanDuration: l.MaxBanDuration.Milliseconds(), OffenseWindow: l.OffenseWindow.Milliseconds(),
		BanReason: l.BanReason,
	})
	return string(b)
}

func decodeLimits(s string) (protect.Limits, error) {
	var r publishedRecord
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return protect.Limits{}, fmt.Errorf("malformed published limits %q: %w", s, err)
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return protect.Limits{
		MaxRequests: r.MaxRequests, TTL: ms(r.TTL), BanLimit: r.BanLimit,
		BanDuration: ms(r.BanDuration), BanFactor: r.BanFactor,
		MaxBanDuration: ms(r.MaxBanDuration), OffenseWindow: ms(r.OffenseWindow),
		BanReason: r.BanReason,
	}, nil
}
