package redisstore

import (
	"strings"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
)

// A ban record from Redis is data that another process wrote: decoding
// it, as a key ban, a range ban or a take reply, must never panic; a
// decoded range ban has a valid range, and one bad record is skipped, not
// fatal.
func FuzzBanRecord(f *testing.F) {
	f.Add("198.51.100.0/24", "1732876400000|1732880000000|0|manual|ops|scanner")
	f.Add("2001:db8::/48", "1732876400000|0|0|manual||a|b|c")
	f.Add("198.51.100.0/24", "0|1|auto||a")
	f.Add("x", "|||||")
	f.Fuzz(func(t *testing.T, field, rec string) {
		b, err := decodeBan(protect.Key{Name: "cus_alpha"}, false, rec)
		if err == nil && (b.Key != protect.Key{Name: "cus_alpha"} || b.Range || !strings.HasSuffix(rec, b.Reason)) {
			t.Fatalf("decodeBan(%q) = %+v", rec, b)
		}
		skipped := 0
		_, bans, err := decodeRanges([]any{int64(1732876400000), field, rec}, func(string, error) { skipped++ })
		if err != nil || len(bans)+skipped != 1 {
			t.Fatalf("decodeRanges(%q, %q) = %+v, %v, %d skipped; want one ban or one skip", field, rec, bans, err, skipped)
		}
		if len(bans) == 1 && (!bans[0].Range || !bans[0].Key.Prefix.IsValid()) {
			t.Fatalf("decodeRanges(%q, %q) = %+v; want a range ban on a valid range", field, rec, bans[0])
		}
		r, err := decodeTake([]any{int64(3), int64(1000), int64(1), rec}, protect.Key{Name: "cus_alpha"})
		if err == nil && (!r.Banned || !r.NewBan || r.Ban == nil || r.Count != 3) {
			t.Fatalf("decodeTake(%q) = %+v; want a new ban", rec, r)
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
		var r protect.PlanResult
		reply := []any{int64(1), a, b, fits, a, b, fits, b, a}
		if err := decodePlan(reply, protect.Key{Name: "cus"}, plan, 2, fits, &r); err != nil {
			t.Fatalf("decodePlan(%v) = %v", reply, err)
		}
		if r.Decider < 0 || r.Decider > 1 {
			t.Fatalf("decider %d of a 2-limit plan", r.Decider)
		}
		decodePlan([]any{int64(0), a, b, fits, rv}, protect.Key{Name: "cus"}, plan, 2, 1, &r)
		decodePlan([]any{rs, qv}, protect.Key{Name: "cus"}, plan, 2, 1, &r)
	})
}
