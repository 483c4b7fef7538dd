package main

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// A ban written by counting failures is an ordinary ban: protectctl lists
// it with its reason, inspects it and lifts it, and the client is served
// again.
func TestFailureBan(t *testing.T) {
	for name, mk := range servers(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			sv := newService(t, s, protect.Config{MaxRequests: 2, BanLimit: 3, TTL: 15 * time.Minute,
				CountStatus: func(code int) bool { return code == http.StatusUnauthorized }})
			h := sv.p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer right" {
					http.Error(w, "no", http.StatusUnauthorized)
				}
			}))
			attempt := func(auth string) int {
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = "203.0.113.9:1234"
				r.Header.Set("Authorization", auth)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w.Code
			}
			var codes []int
			for range 4 {
				codes = append(codes, attempt("Bearer wrong"))
			}
			// Two failures, one refused attempt (count 3), then past 3.
			if want := []int{401, 401, 429, 403}; !slices.Equal(codes, want) {
				t.Fatalf("4 × attempt(\"Bearer wrong\") = %v, want %v", codes, want)
			}
			var recs []admin.BanRecord
			ctlJSON(t, s, &recs, "bans")
			if len(recs) != 1 || recs[0].Key != "203.0.113.9" || recs[0].Reason != "failures passed the ban limit of 3" ||
				recs[0].Source != "auto" || recs[0].Offense != 1 || recs[0].SecondsLeft == nil || *recs[0].SecondsLeft < 3590 || *recs[0].SecondsLeft > 3600 {
				t.Fatalf("protectctl bans -json = %+v, want one automatic ban of 203.0.113.9 for about 1h, offense 1, for failures passed the ban limit of 3", recs)
			}
			if code, out, errs := ctl(t, s, "bans"); code != 0 || !strings.Contains(out, "failures passed the ban limit of 3") {
				t.Fatalf("protectctl bans = exit %d\n%s%s\nwant exit 0 and the reason failures passed the ban limit of 3", code, out, errs)
			}
			var in admin.Inspection
			ctlJSON(t, s, &in, "inspect", "203.0.113.9")
			if in.Ban == nil || in.Ban.Reason != "failures passed the ban limit of 3" || in.Offenses != 1 || in.Count != 0 {
				t.Fatalf("protectctl inspect 203.0.113.9 = %+v, want its ban for failures passed the ban limit of 3, offense 1, count 0", in)
			}
			if code, out, errs := ctl(t, s, "lift", "-by", "alice@ops", "203.0.113.9"); code != 0 || !strings.Contains(out, "203.0.113.9") {
				t.Fatalf("protectctl lift -by alice@ops 203.0.113.9 = exit %d\n%s%s\nwant exit 0 naming it", code, out, errs)
			}
			sv.clock.Advance(500 * time.Millisecond) // the instance's cached ban ages out
			if code := attempt("Bearer right"); code != 200 {
				t.Fatalf("attempt(\"Bearer right\") after the lift = %d, want 200", code)
			}
		})
	}
}
