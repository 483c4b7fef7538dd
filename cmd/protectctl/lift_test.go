package main

import (
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// A target wider than a /8 is banned only with -force and lifted only
// with -force (or everything with -all); a ban covering a whole family,
// which holds loopback, is refused even forced; a CIDR lift lifts every
// ban inside it, even when it is exactly one counting key.
func TestWideTargetsAndCIDRLifts(t *testing.T) {
	for name, mk := range servers(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			sv := newService(t, s, protect.Config{})
			for _, target := range []string{"2001:db8:1:2::/80", "2001:db8:1:2::99", "2001:db8:1:3::/80"} {
				if _, err := sv.p.Ban(t.Context(), target, protect.BanOptions{For: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			var recs []admin.BanRecord
			ctlJSON(t, s, &recs, "lift", "2001:db8:1:2::/64")
			if len(recs) != 2 || recs[0].Key != "2001:db8:1:2::/64" && recs[1].Key != "2001:db8:1:2::/64" {
				t.Fatalf("protectctl lift 2001:db8:1:2::/64 = %+v, want it and the /80 inside it", recs)
			}
			want := "protectctl: protect: bad target: \"0.0.0.0/0\": a ban on 0.0.0.0/0 covers the loopback network 127.0.0.0/8\n"
			if code, _, errs := ctl(t, s, "ban", "-force", "0.0.0.0/0"); code != 2 || errs != want {
				t.Fatalf("protectctl ban -force 0.0.0.0/0 = exit %d %q, want exit 2 %q", code, errs, want)
			}
			ctlJSON(t, s, &recs, "ban", "-force", "-reason", "drill", "128.0.0.0/1")
			if len(recs) != 1 || recs[0].Key != "128.0.0.0/1" || !recs[0].Range {
				t.Fatalf("protectctl ban -force -reason drill 128.0.0.0/1 = %+v, want one range ban of 128.0.0.0/1", recs)
			}
			if code, _, errs := ctl(t, s, "lift", "::ffff:0:0/96"); code != 2 || !strings.Contains(errs, "-all") {
				t.Fatalf("protectctl lift ::ffff:0:0/96 = exit %d %s, want exit 2 naming -all", code, errs)
			}
			ctlJSON(t, s, &recs, "lift", "-force", "::ffff:0:0/96")
			if len(recs) != 1 || recs[0].Key != "128.0.0.0/1" {
				t.Fatalf("protectctl lift -force ::ffff:0:0/96 = %+v, want the ban of 128.0.0.0/1", recs)
			}
			ctlJSON(t, s, &recs, "bans")
			if len(recs) != 1 || recs[0].Key != "2001:db8:1:3::/80" {
				t.Fatalf("protectctl bans after the lifts = %+v, want only 2001:db8:1:3::/80", recs)
			}
		})
	}
}

// explain honours DryRun: a banned client is explained as banned, and
// served with 200, as the dry-running service serves it.
func TestExplainDryRun(t *testing.T) {
	t.Setenv("HTTP_PROTECT_DRY_RUN", "true")
	for name, mk := range servers(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			sv := newEnvService(t, s)
			if _, err := sv.p.Ban(t.Context(), "203.0.113.7", protect.BanOptions{}); err != nil {
				t.Fatal(err)
			}
			if d := sv.verify(t, "203.0.113.7"); d.Status != protect.Banned || d.Refused() {
				t.Fatalf("verify(203.0.113.7) in a dry run = %v, refused %v; want banned, not refused", d.Status, d.Refused())
			}
			var ex admin.Explanation
			ctlJSON(t, s, &ex, "explain", "-remote", "203.0.113.7:1234")
			if ex.Step != admin.StepBanned || ex.Status != 200 || !ex.DryRun || ex.Ban == nil {
				t.Fatalf("protectctl explain -remote 203.0.113.7:1234 -json = %+v, want banned with its ban, 200, dry_run", ex)
			}
			code, out, _ := ctl(t, s, "explain", "-remote", "203.0.113.7:1234")
			if code != 0 || !strings.Contains(out, "banned → 200") || !strings.Contains(out, "dry run") {
				t.Fatalf("protectctl explain -remote 203.0.113.7:1234 = exit %d\n%s\nwant exit 0, \"banned → 200\" and \"dry run\"", code, out)
			}
		})
	}
}
