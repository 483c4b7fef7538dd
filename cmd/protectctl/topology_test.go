package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/redisstore"
)

// On a Cluster and on Sentinel, a service dialed from the URL counts 300
// requests exactly, and protectctl -redis with the same URL lists,
// inspects and lifts the ban it wrote.
func TestCtlOnClusterAndSentinel(t *testing.T) {
	t.Setenv("HTTP_PROTECT_TRUSTED_PROXIES", "127.0.0.1")
	for _, tp := range redistest.Topologies {
		t.Run(tp.Name, func(t *testing.T) {
			url := tp.URL(t)
			ns := fmt.Sprintf("ctl:%x:", rand.Uint64())
			store, err := redisstore.Dial(url, redisstore.Options{RangeRefresh: -1, BanCacheTTL: -1, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			p, err := protect.New(protect.Config{Store: store, Namespace: ns, BanNamespace: ns, MaxRequests: 100, BanLimit: 250, TTL: time.Hour,
				StoreTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close(); store.Close() })
			if err := p.Publish(t.Context()); err != nil {
				t.Fatal(err)
			}
			addr := netip.MustParseAddr("203.0.113.7")
			counts := map[protect.Status]int{}
			for range 300 {
				d, err := p.VerifyAddr(t.Context(), addr)
				if err != nil || d.Err != nil {
					t.Fatalf("VerifyAddr = %v, %v", err, d.Err)
				}
				counts[d.Status]++
			}
			if counts[protect.Allowed] != 100 || counts[protect.Limited] != 150 || counts[protect.Banned] != 50 {
				t.Fatalf("300 requests = %v, want 100 allowed, 150 limited, 50 banned", counts)
			}
			ctl := func(args ...string) (int, string, string) {
				t.Helper()
				var out, errb strings.Builder
				code := run(append([]string{"-redis", url, "-namespace", ns}, args...), &out, &errb)
				return code, out.String(), errb.String()
			}
			ctlJSON := func(v any, args ...string) {
				t.Helper()
				code, out, errs := ctl(append(args, "-json")...)
				if code != 0 {
					t.Fatalf("protectctl %v = exit %d, stderr %s; want exit 0", args, code, errs)
				}
				if err := json.Unmarshal([]byte(out), v); err != nil {
					t.Fatalf("protectctl %v: json.Unmarshal(%q) = %v", args, out, err)
				}
			}
			var recs []admin.BanRecord
			ctlJSON(&recs, "bans")
			if len(recs) != 1 || recs[0].Key != "203.0.113.7" || recs[0].Source != "auto" || recs[0].Offense != 1 {
				t.Fatalf("protectctl bans -json = %+v, want the one automatic ban of 203.0.113.7", recs)
			}
			var in admin.Inspection
			ctlJSON(&in, "inspect", "203.0.113.7")
			if in.Key != "203.0.113.7" || in.Ban == nil || in.Ban.Source != "auto" || in.Offenses != 1 {
				t.Fatalf("protectctl inspect 203.0.113.7 = %+v, want its automatic ban, offense 1", in)
			}
			if code, out, errs := ctl("lift", "203.0.113.7"); code != 0 || !strings.Contains(out, "203.0.113.7") {
				t.Fatalf("protectctl lift 203.0.113.7 = exit %d\n%s%s\nwant exit 0 naming it", code, out, errs)
			}
			ctlJSON(&recs, "bans")
			if len(recs) != 0 {
				t.Fatalf("protectctl bans -json after lift = %+v, want []", recs)
			}
			if d, err := p.VerifyAddr(t.Context(), addr); err != nil || d.Err != nil || d.Status != protect.Allowed || d.Count != 1 {
				t.Fatalf("VerifyAddr after lift = %v count %d, %v, %v; want allowed, count 1", d.Status, d.Count, err, d.Err)
			}
		})
	}
}

// protectctl -redis with a one-node URL to a Cluster node is a usage
// error that names redis+cluster://.
func TestCtlOneNodeURLToClusterNode(t *testing.T) {
	t.Setenv("HTTP_PROTECT_TRUSTED_PROXIES", "127.0.0.1")
	cl := redistest.StartCluster(t, 3, 0, 2*time.Second)
	var out, errb strings.Builder
	code := run([]string{"-redis", "redis://" + cl.Nodes[0].Addr + "/0", "bans"}, &out, &errb)
	want := "use redis+cluster://" + cl.Nodes[0].Addr
	if code != 2 || !strings.Contains(errb.String(), want) || out.Len() != 0 {
		t.Fatalf("protectctl -redis redis://%s/0 bans = exit %d, stdout %q, stderr %q; want exit 2 saying %q", cl.Nodes[0].Addr, code, out.String(), errb.String(), want)
	}
}
