package main

import (
	"encoding/json"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/redisstore"
	"github.com/redis/go-redis/v9"
)

// threeProtectors are a service's address gate, consumer plan and login
// guard: three namespaces, one shared ban list (unless bans says).
func threeProtectors(bans string) []protect.Config {
	return []protect.Config{
		{Namespace: "addr:", MaxRequests: 20, BanLimit: 30},
		{Namespace: "key:", MaxRequests: 5, BanLimit: 6},
		{Namespace: "login:", MaxRequests: 1, BanLimit: 1, BanNamespace: bans},
	}
}

// banByEach makes each protector ban a client of its own: 203.0.113.1
// by the address gate, consumer:cus_x by the consumer plan, 203.0.113.3
// by the login guard.
func banByEach(t *testing.T, ps []*protect.Protector) {
	t.Helper()
	ctx := t.Context()
	for range 31 {
		ps[0].VerifyAddr(ctx, netip.MustParseAddr("203.0.113.1"))
	}
	for range 7 {
		ps[1].VerifyKey(ctx, "cus_x")
	}
	for range 2 {
		ps[2].VerifyAddr(ctx, netip.MustParseAddr("203.0.113.3"))
	}
	for i, p := range ps {
		if err := p.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		if bans, _ := admin.New(p).Bans(ctx, admin.Filter{}); len(bans) == 0 {
			t.Fatalf("protector %d: Bans() = none, want its ban", i)
		}
	}
}

func decode[T any](t *testing.T, args []string, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("protectctl %q: json.Unmarshal(%q) = %v", args, out, err)
	}
	return v
}

// With three protectors in one service, protectctl -server finds a ban
// made by any of them, through any of their namespaces; inspect reports
// each protector with its published limits; a namespace the service does
// not have is an error, never an empty list.
func TestServerSeveralProtectors(t *testing.T) {
	for _, shared := range []bool{true, false} {
		bans := ""
		if !shared {
			bans = "login:" // the login guard keeps a list of its own
		}
		mem := newMemService(t, time.Now, threeProtectors(bans)...)
		banByEach(t, mem.ps)
		for _, ns := range []string{"", "addr:", "key:", "login:"} {
			args := []string{"bans", "-json"}
			if ns != "" {
				args = append([]string{"-namespace", ns}, args...)
			}
			code, out, errs := ctlServer(t, mem.url, args...)
			recs := decode[[]admin.BanRecord](t, args, out)
			want := 3
			if !shared && ns != "" {
				want = map[string]int{"addr:": 2, "key:": 2, "login:": 1}[ns]
			}
			if code != 0 || len(recs) != want {
				t.Errorf("shared %v: protectctl %q = exit %d, %d bans %+v (%s); want %d", shared, args, code, len(recs), recs, errs, want)
			}
		}
		if code, out, errs := ctlServer(t, mem.url, "-namespace", "nope:", "bans"); code != 2 || out != "" || !strings.Contains(errs, `"nope:"`) || !strings.Contains(errs, `"addr:"`) {
			t.Errorf("protectctl -namespace nope: bans = exit %d, stdout %q, stderr %q; want exit 2 naming nope: and the namespaces there are", code, out, errs)
		}
		// The login guard's ban, inspected through the address gate's
		// namespace when they share a list, and through the service.
		for _, args := range [][]string{{"inspect", "-json", "203.0.113.3"}, {"-namespace", "login:", "inspect", "-json", "203.0.113.3"}} {
			_, out, _ := ctlServer(t, mem.url, args...)
			in := decode[admin.Inspection](t, args, out)
			if in.Ban == nil || in.Ban.Reason != "stream passed the ban limit of 1 requests" {
				t.Errorf("shared %v: protectctl %q: ban = %+v, want the login guard's", shared, args, in.Ban)
			}
			for _, p := range in.Protectors {
				if !p.LimitsPublished {
					t.Errorf("shared %v: protectctl %q: protector %s limits_published = false, want true", shared, args, p.Namespace)
				}
			}
		}
		if _, out, _ := ctlServer(t, mem.url, "inspect", "203.0.113.3"); strings.Contains(out, "published no limits") || !strings.Contains(out, "login: (bans in ") {
			t.Errorf("shared %v: protectctl inspect 203.0.113.3 =\n%s\nwant each protector, none saying published no limits", shared, out)
		}
		args := []string{"protectors", "-json"}
		_, out, _ := ctlServer(t, mem.url, args...)
		recs := decode[[]admin.ProtectorRecord](t, args, out)
		if len(recs) != 3 || recs[2].Namespace != "login:" || recs[2].Limits.MaxRequests != 1 || !recs[2].Published || recs[1].Name != "key" {
			t.Errorf("shared %v: protectctl protectors -json = %+v, want addr:, key:, login: with their published limits", shared, recs)
		}
		// A lift through the service finds every ban, whoever made it.
		for _, target := range []string{"203.0.113.1", "consumer:cus_x", "203.0.113.3"} {
			if code, out, errs := ctlServer(t, mem.url, "lift", "-json", target); code != 0 || !strings.Contains(out, `"key"`) {
				t.Errorf("shared %v: protectctl lift %s = exit %d %s %s; want its ban", shared, target, code, out, errs)
			}
		}
		if d, _ := mem.ps[2].VerifyAddr(t.Context(), netip.MustParseAddr("203.0.113.3")); d.Status != protect.Allowed {
			t.Errorf("shared %v: login guard after the lift = %v, want allowed", shared, d.Status)
		}
	}
}

// On Redis, a service of three protectors publishes three namespaces and
// bans in the shared list protect:. protectctl -namespace addr: bans
// used to read the list addr:, empty, and exit 0; inspect without
// -namespace read limits under protect:, where nothing was published,
// and said "the service published no limits". Both find the ban now.
func TestRedisSeveralNamespaces(t *testing.T) {
	mr := miniredis.RunT(t)
	t.Setenv("HTTP_PROTECT_BAN_NAMESPACE", "")
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	store := redisstore.New(c, redisstore.Options{RangeRefresh: -1})
	var ps []*protect.Protector
	for _, cfg := range threeProtectors("") {
		cfg.Store, cfg.Logger = store, slog.New(slog.DiscardHandler)
		p, err := protect.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	t.Cleanup(func() {
		for _, p := range ps {
			p.Close()
		}
		store.Close()
		c.Close()
	})
	banByEach(t, ps)
	redisArgs := func(args ...string) []string { return append([]string{"-redis", "redis://" + mr.Addr()}, args...) }
	for _, ns := range []string{"", "addr:", "key:", "login:", "protect:"} {
		args := redisArgs("bans", "-json")
		if ns != "" {
			args = redisArgs("-namespace", ns, "bans", "-json")
		}
		var out, errb strings.Builder
		code := run(args, &out, &errb)
		recs := decode[[]admin.BanRecord](t, args, out.String())
		if code != 0 || len(recs) != 3 {
			t.Errorf("protectctl %q = exit %d, %d bans %+v (%s); want the 3 bans of the shared list", args, code, len(recs), recs, errb.String())
		}
	}
	// lift -all empties one list, which -namespace addr: does not name
	// for certain.
	var o, e strings.Builder
	if code := run(redisArgs("-namespace", "addr:", "lift", "-all"), &o, &e); code != 2 || !strings.Contains(e.String(), "HTTP_PROTECT_BAN_NAMESPACE") {
		t.Fatalf("protectctl -namespace addr: lift -all = exit %d, stderr %q; want exit 2 naming HTTP_PROTECT_BAN_NAMESPACE", code, e.String())
	}
	args := redisArgs("inspect", "203.0.113.3")
	var out, errb strings.Builder
	if code := run(args, &out, &errb); code != 0 || strings.Contains(out.String(), "published no limits") ||
		!strings.Contains(out.String(), "stream passed the ban limit of 1 requests") || !strings.Contains(out.String(), "login: (bans in protect:)") {
		t.Fatalf("protectctl %q = exit %d\n%s%s\nwant the login guard's ban, and each published namespace", args, code, out.String(), errb.String())
	}
	args = redisArgs("protectors", "-json")
	out.Reset()
	run(args, &out, &errb)
	recs := decode[[]admin.ProtectorRecord](t, args, out.String())
	if len(recs) != 3 || recs[0].Namespace != "addr:" || recs[1].Namespace != "key:" || recs[2].Namespace != "login:" || !recs[2].Published || recs[2].Limits.BanLimit != 1 {
		t.Fatalf("protectctl %q = %+v, want addr:, key:, login: with their published limits", args, recs)
	}
}
