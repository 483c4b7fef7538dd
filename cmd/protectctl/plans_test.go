package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/envconfig"
)

const plansJSON = `{"pro":  {"rates":  [{"name": "burst", "limit": 10, "period": "1h", "burst": 20}],
          "quotas": [{"name": "monthly", "limit": 100000, "period": "monthly"}, {"name": "daily", "limit": 5000, "period": "daily"}]},
 "free": {"rates":  [{"name": "burst", "limit": 1, "period": "12m", "burst": 5}],
          "quotas": [{"name": "monthly", "limit": 1000, "period": "monthly"}]}}`

// inspect consumer:NAME shows each stored limit of the consumer, and with
// the plans file what is left of each under each plan.
func TestInspectConsumerPlans(t *testing.T) {
	plans, err := envconfig.ParsePlans([]byte(plansJSON))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(file, []byte(plansJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, mk := range servers(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			sv := newService(t, s, protect.Config{})
			for range 3 {
				if d, err := sv.p.VerifyConsumer(t.Context(), "acme", plans["free"]); err != nil || d.Err != nil || d.Status != protect.Allowed {
					t.Fatalf("VerifyConsumer(acme, free) = %v, err %v, Err %v; want allowed", d.Status, err, d.Err)
				}
			}
			month := time.Now().UTC().Format("2006-01")

			var in admin.Inspection
			ctlJSON(t, s, &in, "inspect", "consumer:acme")
			if in.Key != "acme" || len(in.Limits) != 2 || in.Limits[0].Name != "burst" || in.Limits[0].Kind != "rate" || in.Limits[0].Used != 0 ||
				in.Limits[0].ResetMS <= 3*12*60*1000-5000 || in.Limits[0].ResetMS > 3*12*60*1000 || len(in.Limits[0].Left) != 0 ||
				in.Limits[1].Name != "monthly" || in.Limits[1].Period != "monthly" || in.Limits[1].Window != month || in.Limits[1].Used != 3 || !in.Limits[1].Stored {
				t.Fatalf("protectctl inspect consumer:acme = %+v, want burst (rate, nothing used, resetting in about 36m, nothing left shown) and monthly (%s, 3 used, stored)", in.Limits, month)
			}

			ctlJSON(t, s, &in, "inspect", "-plans", file, "consumer:acme")
			burst, monthly := in.Limits[0], in.Limits[1]
			// free's bucket: 3 of 5 taken; pro's, with a backlog of 36 minutes
			// at 6 minutes a token: 20 − 6 = 14.
			if len(burst.Left) != 2 || burst.Left[0] != (admin.PlanLeft{Plan: "free", Limit: 5, Left: 2}) || burst.Left[1] != (admin.PlanLeft{Plan: "pro", Limit: 20, Left: 14}) {
				t.Fatalf("protectctl inspect -plans FILE consumer:acme = burst left %+v, want free 2 of 5, pro 14 of 20", burst.Left)
			}
			if len(monthly.Left) != 2 || monthly.Left[0] != (admin.PlanLeft{Plan: "free", Limit: 1000, Left: 997}) || monthly.Left[1] != (admin.PlanLeft{Plan: "pro", Limit: 100000, Left: 99997}) {
				t.Fatalf("protectctl inspect -plans FILE consumer:acme = monthly left %+v, want free 997 of 1000, pro 99997 of 100000", monthly.Left)
			}

			// The plans as protectd also takes them, inline in the value of
			// HTTP_PROTECT_PLANS, read the same.
			var inline admin.Inspection
			ctlJSON(t, s, &inline, "inspect", "-plans", plansJSON, "consumer:acme")
			if len(inline.Limits) != 2 || !slices.Equal(inline.Limits[0].Left, burst.Left) || !slices.Equal(inline.Limits[1].Left, monthly.Left) {
				t.Fatalf("protectctl inspect -plans JSON consumer:acme = %+v, want what -plans FILE left: burst %+v, monthly %+v", inline.Limits, burst.Left, monthly.Left)
			}

			ctlJSON(t, s, &in, "inspect", "-plans", file, "-plan", "pro", "consumer:acme")
			if len(in.Limits) != 3 || in.Limits[1].Name != "daily" || in.Limits[1].Stored || len(in.Limits[1].Left) != 1 || in.Limits[1].Left[0].Left != 5000 {
				t.Fatalf("protectctl inspect -plans FILE -plan pro consumer:acme = %+v, want 3 limits, the second daily, not stored, 5000 left", in.Limits)
			}

			code, out, errs := ctl(t, s, "inspect", "-plans", file, "consumer:acme")
			// The backlog was 36m when written, less whatever time has passed.
			m := regexp.MustCompile(`burst \(rate\): backlog (\S+?);`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("protectctl inspect -plans FILE consumer:acme =\n%s%s\nwant a burst backlog", out, errs)
			}
			if backlog, err := time.ParseDuration(m[1]); err != nil || backlog <= 35*time.Minute || backlog > 36*time.Minute {
				t.Fatalf("protectctl inspect -plans FILE consumer:acme = burst backlog %q, want in (35m, 36m]", m[1])
			}
			for _, want := range []string{
				"left: free 2 of 5, pro 14 of 20",
				"monthly (monthly quota, " + month + "): 3 used, resets in ", "left: free 997 of 1000, pro 99997 of 100000",
			} {
				if code != 0 || !strings.Contains(out, want) {
					t.Fatalf("protectctl inspect -plans FILE consumer:acme = exit %d\n%s%s\nwant exit 0 and %q", code, out, errs, want)
				}
			}
			if code, out, _ := ctl(t, s, "inspect", "-plans", file, "-plan", "pro", "consumer:acme"); code != 0 || !strings.Contains(out, "daily (daily quota): nothing used; left: pro 5000 of 5000") {
				t.Fatalf("protectctl inspect -plans FILE -plan pro consumer:acme = exit %d\n%s\nwant exit 0 and \"daily (daily quota): nothing used; left: pro 5000 of 5000\"", code, out)
			}
			if _, out, _ := ctl(t, s, "inspect", "-json", "203.0.113.7"); !strings.Contains(out, `"limits": []`) {
				t.Fatalf("protectctl inspect -json 203.0.113.7 = %s, want \"limits\": [] for an address without a plan", out)
			}
		})
	}
}

func TestInspectPlansUsage(t *testing.T) {
	s := servers(t)["miniredis"](t)
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"pro": {"rates": [{"limit": 0, "period": "1s"}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(t.TempDir(), "good.json")
	if err := os.WriteFile(good, []byte(plansJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", "-plans", bad, "consumer:acme"}, `plan "pro": limit 1`},
		{[]string{"inspect", "-plans", filepath.Join(t.TempDir(), "missing.json"), "consumer:acme"}, "missing.json"},
		{[]string{"inspect", "-plan", "pro", "consumer:acme"}, "needs -plans"},
		{[]string{"inspect", "-plans", good, "-plan", "gold", "consumer:acme"}, `-plan "gold": not in`},
	} {
		code, _, errs := ctl(t, s, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("protectctl %v: exit %d, %q; want exit 2 saying %q", c.args, code, errs, c.want)
		}
	}
}
