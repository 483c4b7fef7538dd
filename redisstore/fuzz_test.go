package redisstore

import (
	"strings"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/store"
)

// A ban record from Redis is data that another process wrote: decoding
// it, as a key ban, a range ban or a take reply, must never panic; a
// record that decodes has the fields a store writes (a source of auto or
// manual, times in order, the reason its tail); one that does not is
// reported as a malformed ban on its own key, never an error of the whole
// reply, and a take reply names it for the caller to ask again.
func FuzzBanRecord(f *testing.F) {
	f.Add("198.51.100.0/24", "1732876400000|1732880000000|0|manual|ops|scanner", int64(1000))
	f.Add("2001:db8::/48", "1732876400000|0|0|manual||a|b|c", int64(-1))
	f.Add("198.51.100.0/24", "0|1|auto||a", int64(5))
	f.Add("x", "|||||", int64(0))
	f.Add("198.51.100.7/32", "garbage", int64(-1))
	f.Add("198.51.100.7/32", "1|2|x|auto||r", int64(-1))
	f.Add("198.51.100.7/32", "1|2|0|auto||r", int64(-1))
	f.Add("198.51.100.7/32", "+1|2|0|auto||r", int64(5))
	f.Add("198.51.100.7/32", "5|2|0|auto||r", int64(5))
	f.Add("198.51.100.7/32", "1|99999999999999999999|0|auto||r", int64(5))
	f.Add("198.51.100.7/32", "1|2|0|nobody||r", int64(5))
	f.Fuzz(func(t *testing.T, field, rec string, left int64) {
		k := protect.Key{Name: "cus_alpha"}
		b, err := decodeBan(k, false, rec)
		if err == nil {
			if b.Key != k || b.Range || !strings.HasSuffix(rec, b.Reason) ||
				(b.Source != protect.SourceAuto && b.Source != protect.SourceManual) ||
				(!b.Permanent() && b.Expires.Before(b.Created)) || b.Offense < 0 || b.Malformed != "" {
				t.Fatalf("decodeBan(%q) = %+v", rec, b)
			}
		}
		if rb := readBan(k, false, rec, left); (rb.Malformed == "") != (err == nil && (left != -1 || b.Permanent())) || rb.Key != k {
			t.Fatalf("readBan(%q, %d) = %+v; decodeBan's error %v", rec, left, rb, err)
		}
		skipped := 0
		_, bans, err := decodeRanges([]any{int64(1732876400000), field, rec}, func(string, error) { skipped++ })
		if err != nil || len(bans)+skipped != 1 {
			t.Fatalf("decodeRanges(%q, %q) = %+v, %v, %d skipped; want one ban or one skip", field, rec, bans, err, skipped)
		}
		if len(bans) == 1 && (!bans[0].Range || !bans[0].Key.Prefix.IsValid()) {
			t.Fatalf("decodeRanges(%q, %q) = %+v; want a range ban on a valid range", field, rec, bans[0])
		}
		tr, err := decodeTake([]any{int64(3), left, int64(1), rec}, k)
		switch {
		case err != nil:
			t.Fatalf("decodeTake(%q) = %v; a ban record's damage is not the reply's", rec, err)
		case tr.bad == nil && (!tr.res.Banned() || !tr.res.NewBan || tr.res.Count != 3):
			t.Fatalf("decodeTake(%q) = %+v; want a new ban", rec, tr.res)
		case tr.bad != nil && (tr.res.Banned() || tr.bad.rec != rec):
			t.Fatalf("decodeTake(%q) = %+v, %+v; want a bad record and no ban", rec, tr.res, tr.bad)
		}
	})
}

// A store's reply is data another process wrote: decoding a plan reply or
// a plan key never panics, whatever the numbers.
func FuzzPlanReply(f *testing.F) {
	f.Add(":r:burst", "1800000000000000|5", ":q:monthly:2026-11", "12", int64(1), int64(1800000000000000), int64(7))
	f.Add(":q:x", "", ":r:", "|", int64(0), int64(-1), int64(1<<62))
	f.Fuzz(func(t *testing.T, rs, rv, qs, qv string, fits, a, b int64) {
		for _, c := range [][2]string{{rs, rv}, {qs, qv}} {
			if u, err := decodeUsage(c[0], c[1], time.Second); err == nil && !validLimitName(u.Name) {
				t.Fatalf("decodeUsage(%q, %q) = %+v: a name no plan can hold", c[0], c[1], u)
			}
		}
		plan := mustPlan(t, "fuzz", protect.Rate{Limit: 3, Period: time.Second, Burst: 7}, protect.Quota{Limit: 9, Period: protect.Daily})
		var r store.PlanResult
		reply := []any{int64(1), a, b, fits, a, b, fits, b, a}
		if _, err := decodePlan(reply, protect.Key{Name: "cus"}, plan, 2, fits, &r); err != nil {
			t.Fatalf("decodePlan(%v) = %v", reply, err)
		}
		if r.Decider < 0 || r.Decider > 1 {
			t.Fatalf("decider %d of a 2-limit plan", r.Decider)
		}
		decodePlan([]any{int64(0), a, b, fits, rv}, protect.Key{Name: "cus"}, plan, 2, 1, &r)
		decodePlan([]any{rs, qv}, protect.Key{Name: "cus"}, plan, 2, 1, &r)
	})
}
