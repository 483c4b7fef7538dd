package main

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// protectctl allow puts a target on the service's allowlist, lifting its
// ban, for a while; allows lists the entries; disallow removes one.
func TestAllowCommands(t *testing.T) {
	clk := &fakeClock{t: time.Now()}
	ms := newMemService(t, clk.Now, protect.Config{})
	p, ctx := ms.ps[0], t.Context()
	if _, err := p.Ban(ctx, "203.0.113.7", protect.BanOptions{Reason: "scan"}); err != nil {
		t.Fatal(err)
	}

	code, out, errs := ctlServer(t, ms.url, "allow", "-for", "1h", "-reason", "monitor", "-by", "ops", "-json", "203.0.113.7")
	var res admin.AllowResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Allowed) != 1 || res.Allowed[0].Key != "203.0.113.7" ||
		res.Allowed[0].Reason != "monitor" || *res.Allowed[0].SecondsLeft != 3600 || len(res.Lifted) != 1 || res.Lifted[0].Reason != "scan" {
		t.Fatalf("allow -for 1h -json 203.0.113.7 = exit %d, %s (stderr %q); want the entry and the lifted ban", code, out, errs)
	}
	if d, _ := p.VerifyAddr(ctx, netip.MustParseAddr("203.0.113.7")); d.Status != protect.Safe {
		t.Fatalf("Verify(203.0.113.7) after allow = %v, want Safe", d.Status)
	}
	code, out, errs = ctlServer(t, ms.url, "allow", "198.51.100.0/24")
	if code != 0 || !strings.HasPrefix(out, "KEY ") || !strings.Contains(out, "198.51.100.0/24") || errs != "" {
		t.Fatalf("allow 198.51.100.0/24 = exit %d, %q, stderr %q; want a table of the entry, nothing lifted", code, out, errs)
	}
	code, out, _ = ctlServer(t, ms.url, "allows", "-json")
	var list []admin.BanRecord
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 {
		t.Fatalf("allows -json = exit %d, %s; want two entries", code, out)
	}
	code, out, _ = ctlServer(t, ms.url, "disallow", "-json", "203.0.113.7")
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].Key != "203.0.113.7" {
		t.Fatalf("disallow -json 203.0.113.7 = exit %d, %s; want its entry", code, out)
	}
	if code, _, errs := ctlServer(t, ms.url, "disallow", "203.0.113.7"); code != 0 || errs != "protectctl: nothing was allowed there\n" {
		t.Fatalf("disallow 203.0.113.7 again = exit %d, stderr %q; want 0, nothing was allowed there", code, errs)
	}
	for _, args := range [][]string{{"allow"}, {"allow", "consumer:acme"}, {"allow", "-for", "soon", "192.0.2.1"}, {"allows", "x"}, {"disallow"}} {
		if code, _, errs := ctlServer(t, ms.url, args...); code != 2 {
			t.Errorf("%q = exit %d (stderr %q), want 2", args, code, errs)
		}
	}
}
