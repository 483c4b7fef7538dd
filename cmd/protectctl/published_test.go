package main

import (
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// inspect and explain show the numbers the service publishes in its
// namespace, not the tool's defaults (200, ban past 1000): a service on
// MaxRequests 250 whose client has made 249 requests is "249 of 250" and
// allowed, where the tool's own settings would call it limited. Before the
// service has counted anything it has published nothing, and they say the
// numbers are the tool's; protectctl itself never publishes.
func TestInspectShowsPublishedLimits(t *testing.T) {
	for name, newSrv := range servers(t) {
		t.Run(name, func(t *testing.T) {
			s := newSrv(t)
			svc := newService(t, s, protect.Config{MaxRequests: 250})
			var before admin.Inspection
			ctlJSON(t, s, &before, "inspect", "192.0.2.1")
			if before.Limit != 200 || before.LimitsPublished {
				t.Fatalf("protectctl inspect -json 192.0.2.1 with nothing published = limit %d, published %v; want the tool's 200, false", before.Limit, before.LimitsPublished)
			}
			if _, out, _ := ctl(t, s, "inspect", "192.0.2.1"); !strings.Contains(out, "0 of 200 (ban past 1000; this tool's settings: the service published no limits)") {
				t.Fatalf("protectctl inspect 192.0.2.1 with nothing published =\n%s\nwant \"0 of 200 (ban past 1000; this tool's settings: the service published no limits)\"", out)
			}

			// The service publishes once it counts, in the background.
			for range 249 {
				svc.verify(t, "192.0.2.1")
			}
			var in admin.Inspection
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				ctlJSON(t, s, &in, "inspect", "192.0.2.1")
				if in.LimitsPublished || time.Now().After(deadline) {
					break
				}
			}
			if in.Count != 249 || in.Limit != 250 || in.BanLimit != 1250 || !in.LimitsPublished {
				t.Fatalf("protectctl inspect -json 192.0.2.1 = count %d of %d, ban past %d, published %v; want 249 of 250, 1250, true", in.Count, in.Limit, in.BanLimit, in.LimitsPublished)
			}
			if _, out, _ := ctl(t, s, "inspect", "192.0.2.1"); !strings.Contains(out, "249 of 250 (ban past 1250)") {
				t.Fatalf("protectctl inspect 192.0.2.1 =\n%s\nwant \"249 of 250 (ban past 1250)\"", out)
			}
			var ex admin.Explanation
			ctlJSON(t, s, &ex, "explain", "-remote", "192.0.2.1:1234")
			if ex.Step != admin.StepAllowed || ex.Status != 200 || ex.Limit != 250 || !ex.LimitsPublished {
				t.Fatalf("protectctl explain -remote 192.0.2.1:1234 -json = %+v; want allowed (249 of 250), published", ex)
			}
			if d := svc.verify(t, "192.0.2.1"); d.Status != protect.Allowed {
				t.Fatalf("verify(192.0.2.1) #250 = %v, want allowed, as explain said", d.Status)
			}
		})
	}
}
