package redisstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/httpprotect/protect/store"
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

// maxRecordMillis is the last millisecond of the year 9999: a ban
// record's times are at most this, so that every one is a time.Time that
// formats, and a number Lua's doubles hold exactly.
const maxRecordMillis = 253402300799999

// decodeBan reads a ban record. It is strict: six fields; created, expires
// and offense in decimal digits; expires 0 (permanent) or no earlier than
// created; a source of auto or manual. Anything else is a record this
// store did not write, and an error says which field is wrong.
func decodeBan(k store.Key, isRange bool, rec string) (store.Ban, error) {
	f := strings.SplitN(rec, "|", 6)
	if len(f) != 6 {
		return store.Ban{}, fmt.Errorf("%d fields of the 6 of created|expires|offense|source|by|reason", len(f))
	}
	var n [3]int64
	for i, name := range [...]string{"created", "expires", "offense"} {
		v, err := recordNumber(f[i])
		if err != nil {
			return store.Ban{}, fmt.Errorf("%s %q: %w", name, f[i], err)
		}
		n[i] = v
	}
	created, expires, offense := n[0], n[1], n[2]
	switch {
	case expires != 0 && expires < created:
		return store.Ban{}, fmt.Errorf("expires %d before created %d", expires, created)
	case offense > math.MaxInt32:
		return store.Ban{}, fmt.Errorf("offense %d: too large", offense)
	}
	src := store.Source(f[3])
	if src != store.SourceAuto && src != store.SourceManual {
		return store.Ban{}, fmt.Errorf("source %q: want %q or %q", f[3], store.SourceAuto, store.SourceManual)
	}
	b := store.Ban{Key: k, Range: isRange, Created: time.UnixMilli(created).UTC(), Offense: int(offense),
		Source: src, By: f[4], Reason: f[5]}
	if expires != 0 {
		b.Expires = time.UnixMilli(expires).UTC()
	}
	return b, nil
}

// recordNumber reads one of a record's times or its offense: decimal
// digits, at most maxRecordMillis.
func recordNumber(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("not a decimal number")
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v > maxRecordMillis {
		return 0, errors.New("out of range")
	}
	return v, nil
}

// errNeverEnds is the damage of a temporary ban whose key has no expiry:
// the record says it ends, Redis would keep it for ever.
func errNeverEnds(b store.Ban) error {
	return fmt.Errorf("a ban that ends at %s on a key that never expires", b.Expires.Format(time.RFC3339))
}

// readBan reads the ban record rec of key k, whose Redis key has pttl
// milliseconds left (-1: no expiry; anything else when not known): a ban,
// or a Ban whose Malformed says what is wrong with rec.
func readBan(k store.Key, isRange bool, rec string, pttl int64) store.Ban {
	b, err := decodeBan(k, isRange, rec)
	if err == nil && pttl == -1 && !b.Permanent() {
		err = errNeverEnds(b)
	}
	if err != nil {
		return malformedBan(k, isRange, rec, err)
	}
	return b
}

// malformedBan is the Ban that reports the unreadable record rec.
func malformedBan(k store.Key, isRange bool, rec string, err error) store.Ban {
	return store.Ban{Key: k, Range: isRange, Malformed: err.Error() + ": " + store.QuoteMalformed(rec)}
}

// takeReply is a take script's reply, decoded.
type takeReply struct {
	res store.Result
	// ignored: the script found a damaged ban record, the one it was told
	// to ignore, and decided as if it were absent.
	ignored bool
	// bad, when not nil, is a ban record the script found and Go cannot
	// read: res is zero, and the take is to be asked again, ignoring it.
	bad *badRecord
	// counter, when not "", is what the key's counter held instead of a
	// count: the script counted again from nothing (add_count in
	// lua/prelude.lua), and res is that count.
	counter string
}

// badRecord is a ban record that does not decode.
type badRecord struct {
	rec string
	err error
}

func (b *badRecord) Error() string { return b.err.Error() }

// decodeTake reads the take script's reply: the count when not banned,
// {count} when not banned because the damaged record it was told to
// ignore is there, else {count, ms left (-1: the key never expires), new,
// record}.
func decodeTake(v any, k store.Key) (takeReply, error) {
	if n, ok := v.(int64); ok {
		return takeReply{res: store.Result{Count: n}}, nil
	}
	a, ok := v.([]any)
	if ok && len(a) == 1 {
		n, err := toInt(a[0])
		return takeReply{res: store.Result{Count: n}, ignored: true}, err
	}
	if ok && len(a) == 3 && str(a[1]) == "counter" {
		n, err := toInt(a[0])
		return takeReply{res: store.Result{Count: n}, counter: str(a[2])}, err
	}
	if !ok || len(a) != 4 {
		return takeReply{}, fmt.Errorf("unexpected reply %v", v)
	}
	count, err1 := toInt(a[0])
	left, err2 := toInt(a[1])
	isNew, err3 := toInt(a[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return takeReply{}, err
	}
	rec := str(a[3])
	b, err := decodeBan(k, false, rec)
	if err == nil && left < 0 && !b.Permanent() {
		err = errNeverEnds(b)
	}
	if err != nil {
		return takeReply{bad: &badRecord{rec: rec, err: err}}, nil
	}
	r := store.Result{Count: count, NewBan: isNew == 1, Ban: &b}
	if !b.Permanent() {
		r.BanLeft = time.Duration(left) * time.Millisecond
	}
	return takeReply{res: r}, nil
}

// decodeRanges reads the ranges script's reply: Redis' time, and the
// range bans it lists. A record that does not decode is a Ban whose
// Malformed says why, so that one bad record can neither hide the others
// nor itself; a field that is not a range names nothing a listing could
// show or lift, and is reported through skip.
func decodeRanges(v []any, skip func(field string, err error)) (now int64, bans []store.Ban, err error) {
	if len(v) == 0 || len(v)%2 != 1 {
		return 0, nil, fmt.Errorf("unexpected reply of %d values", len(v))
	}
	if now, err = toInt(v[0]); err != nil {
		return 0, nil, err
	}
	for i := 1; i+1 < len(v); i += 2 {
		field := str(v[i])
		p, err := netip.ParsePrefix(field)
		if err != nil {
			skip(field, err)
			continue
		}
		bans = append(bans, readBan(store.Key{Prefix: p}, true, str(v[i+1]), 0))
	}
	return now, bans, nil
}

// redisBase returns <ns>{<key>}, the base of a key's Redis keys.
func redisBase(ns string, k store.Key) string {
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
func redisKeys(ns, bns string, k store.Key) (counter, ban, offenses string) {
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
// limit's outcome (fits, a, b) in the plan's order; the first value is 2
// rather than 1 when the script ignored the damaged ban record it was
// told to. A ban record Go cannot read is a *badRecord error.
func decodePlan(v any, k store.Key, p *store.Plan, n int, cost int64, r *store.PlanResult) (ignored bool, err error) {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		return false, fmt.Errorf("unexpected reply %v", v)
	}
	kind, err := toInt(a[0])
	if err != nil {
		return false, err
	}
	if kind == 0 {
		tr, err := decodeTake(a[1:], k)
		if err != nil {
			return false, err
		}
		if tr.bad != nil {
			return false, tr.bad
		}
		r.Result, r.Decider = tr.res, -1
		return false, nil
	}
	if len(a) != 3+3*n {
		return false, fmt.Errorf("unexpected reply of %d values for %d limits", len(a), n)
	}
	now, err1 := toInt(a[1])
	count, err2 := toInt(a[2])
	if err := errors.Join(err1, err2); err != nil {
		return false, err
	}
	var out [store.MaxPlanLimits]store.LimitOutcome
	for i := range n {
		fits, err1 := toInt(a[3+3*i])
		x, err2 := toInt(a[4+3*i])
		y, err3 := toInt(a[5+3*i])
		if err := errors.Join(err1, err2, err3); err != nil {
			return false, err
		}
		out[i] = store.LimitOutcome{Fits: fits == 1, A: x, B: y}
	}
	r.Count = count
	r.Fill(p, now, cost, &out)
	return kind == 2, nil
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

func encodeLimits(l store.Limits) string {
	b, _ := json.Marshal(publishedRecord{ // a struct of numbers and a string: cannot fail
		MaxRequests: l.MaxRequests, TTL: l.TTL.Milliseconds(), BanLimit: l.BanLimit,
		BanDuration: l.BanDuration.Milliseconds(), BanFactor: l.BanFactor,
		MaxBanDuration: l.MaxBanDuration.Milliseconds(), OffenseWindow: l.OffenseWindow.Milliseconds(),
		BanReason: l.BanReason,
	})
	return string(b)
}

func decodeLimits(s string) (store.Limits, error) {
	var r publishedRecord
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return store.Limits{}, fmt.Errorf("malformed published limits %q: %w", s, err)
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return store.Limits{
		MaxRequests: r.MaxRequests, TTL: ms(r.TTL), BanLimit: r.BanLimit,
		BanDuration: ms(r.BanDuration), BanFactor: r.BanFactor,
		MaxBanDuration: ms(r.MaxBanDuration), OffenseWindow: ms(r.OffenseWindow),
		BanReason: r.BanReason,
	}, nil
}
