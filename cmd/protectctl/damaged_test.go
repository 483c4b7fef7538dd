package main

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// A garbage ban record for one client: the service decides that client
// as if the record were absent, the circuit never opens, another client's
// 300 requests are counted exactly in Redis, and protectctl lists the
// record as malformed, inspects it and lifts it, saying it did.
func TestDamagedBanRecord(t *testing.T) {
	for name, mk := range servers(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			sv := newService(t, s, protect.Config{OnStoreError: protect.FailClosed, StoreTimeout: 10 * time.Second}) // no load reaches it: the test counts failures
			ctx := t.Context()
			bad := s.ns + "{198.18.7.21}:b"
			s.c.Set(ctx, bad, "garbage", 0)
			for i := 1; i <= 5; i++ {
				if d := sv.verify(t, "198.18.7.21"); d.Status != protect.Allowed || d.Count != int64(i) {
					t.Fatalf("verify(198.18.7.21) #%d = %v, count %d; want allowed, count %d", i, d.Status, d.Count, i)
				}
			}
			for range 300 {
				sv.p.VerifyAddr(ctx, netip.MustParseAddr("198.18.7.22"))
			}
			if v, _ := s.c.Get(ctx, s.ns+"{198.18.7.22}:c").Result(); v != "300" {
				t.Fatalf("GET the other client's counter = %q, want 300", v)
			}
			if st := sv.p.Stats(); st.CircuitOpens != 0 || st.StoreFailures != 0 || st.Malformed != 5 {
				t.Fatalf("Stats: %d circuit opens, %d failures, %d malformed; want 0, 0, 5", st.CircuitOpens, st.StoreFailures, st.Malformed)
			}

			var recs []admin.BanRecord
			ctlJSON(t, s, &recs, "bans")
			if len(recs) != 1 || recs[0].Key != "198.18.7.21" || !strings.Contains(recs[0].Malformed, `"garbage"`) || recs[0].Source != "" {
				t.Fatalf("protectctl bans -json = %+v, want the damaged record, malformed", recs)
			}
			code, out, errs := ctl(t, s, "bans")
			if code != 0 || !strings.Contains(out, "198.18.7.21") || !strings.Contains(out, "malformed") || !strings.Contains(out, `"garbage"`) {
				t.Fatalf("protectctl bans = exit %d\n%s%s\nwant the record, malformed", code, out, errs)
			}
			var in admin.Inspection
			ctlJSON(t, s, &in, "inspect", "198.18.7.21")
			if in.Ban == nil || in.Ban.Malformed == "" || in.Count != 5 {
				t.Fatalf("protectctl inspect -json = %+v, want count 5 and the ban malformed", in)
			}
			code, out, errs = ctl(t, s, "inspect", "198.18.7.21")
			if code != 0 || !strings.Contains(out, "malformed record, not enforced") {
				t.Fatalf("protectctl inspect = exit %d\n%s%s\nwant the ban said malformed", code, out, errs)
			}
			code, out, errs = ctl(t, s, "lift", "198.18.7.21")
			if code != 0 || !strings.Contains(out, "198.18.7.21") || !strings.Contains(out, "malformed") || strings.Contains(errs, "fail") || !strings.Contains(errs, "malformed ban record lifted") {
				t.Fatalf("protectctl lift = exit %d\n%s%s\nwant exit 0, the record lifted", code, out, errs)
			}
			if n, _ := s.c.Exists(ctx, bad).Result(); n != 0 {
				t.Fatalf("EXISTS %s = %d after the lift, want 0", bad, n)
			}
			ctlJSON(t, s, &recs, "bans")
			if len(recs) != 0 {
				t.Fatalf("protectctl bans after the lift = %+v, want []", recs)
			}
			// lift -all lifts damaged records too, and says so.
			s.c.Set(ctx, bad, "1|2|x|auto||r", 0)
			sv.verify(t, "198.18.7.21")
			ctlJSON(t, s, &recs, "lift", "-all")
			if len(recs) != 1 || recs[0].Malformed == "" {
				t.Fatalf("protectctl lift -all -json = %+v, want the damaged record", recs)
			}
		})
	}
}
