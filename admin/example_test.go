package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

func newProtector(cfg protect.Config) *protect.Protector {
	cfg.Logger = slog.New(slog.DiscardHandler)
	p, err := protect.New(cfg)
	if err != nil {
		panic(err)
	}
	return p
}

// List bans inside a network, by source.
func ExampleAdmin_Bans() {
	p := newProtector(protect.Config{MaxRequests: 1, BanLimit: 2})
	defer p.Close()
	ctx := context.Background()
	for range 3 { // a client passes its ban limit
		p.VerifyAddr(ctx, netip.MustParseAddr("198.51.100.20"))
	}
	a := admin.New(p)
	a.Ban(ctx, []string{"203.0.113.0/24", "consumer:cus_fraud"}, protect.BanOptions{For: 24 * time.Hour, Reason: "abuse", By: "ops"})

	all, _ := a.Bans(ctx, admin.Filter{})
	auto, _ := a.Bans(ctx, admin.Filter{Source: protect.SourceAuto})
	inside, _ := a.Bans(ctx, admin.Filter{Within: netip.MustParsePrefix("203.0.0.0/8")})
	fmt.Println(len(all), "bans")
	fmt.Println("auto:", auto[0].Key, auto[0].Reason)
	fmt.Println("inside 203.0.0.0/8:", inside[0].Key, inside[0].Range)
	// Output:
	// 3 bans
	// auto: 198.51.100.20 stream passed the ban limit of 2 requests
	// inside 203.0.0.0/8: 203.0.113.0/24 true
}

// Lifting an address lifts the key it is counted under.
func ExampleAdmin_Lift() {
	p := newProtector(protect.Config{})
	defer p.Close()
	ctx := context.Background()
	a := admin.New(p)
	a.Ban(ctx, []string{"2001:db8:1:2::5"}, protect.BanOptions{Permanent: true, Reason: "scraper"})

	lifted, _ := a.Lift(ctx, []string{"2001:db8:1:2::99"}, "ops")
	fmt.Println("lifted", lifted[0].Key, lifted[0].Reason)
	_, err := a.Lift(ctx, nil, "ops")
	fmt.Println(err)
	// Output:
	// lifted 2001:db8:1:2::/64 scraper
	// admin: no target (lifting every ban must be asked for explicitly)
}

// Inspect a target without changing it.
func ExampleAdmin_Inspect() {
	p := newProtector(protect.Config{MaxRequests: 10, SafeNetworks: []string{"10.0.0.0/8"}})
	defer p.Close()
	ctx := context.Background()
	for range 3 {
		p.VerifyAddr(ctx, netip.MustParseAddr("::ffff:192.0.2.1"))
	}
	in, _ := admin.New(p).Inspect(ctx, "192.0.2.1")
	fmt.Println(in.Key, in.Count, "of", in.Limit, "safe:", in.Safe, "ban:", in.Ban)
	in, _ = admin.New(p).Inspect(ctx, "10.1.2.3")
	fmt.Println(in.Key, "safe:", in.Safe)
	// Output:
	// 192.0.2.1 3 of 10 safe: false ban: <nil>
	// 10.1.2.3 safe: true
}

// Explain who a request's client is and what would happen to it, without
// counting anything.
func ExampleAdmin_Explain() {
	p := newProtector(protect.Config{TrustedProxies: []string{"10.0.0.0/8"}})
	defer p.Close()
	a := admin.New(p)
	ctx := context.Background()
	for _, h := range []string{"6.6.6.6, 1.2.3.4", "1.2.3.4, garbage"} {
		ex, _ := a.Explain(ctx, "10.0.0.1:5555", map[string][]string{"X-Forwarded-For": {h}})
		fmt.Printf("%q → client %q, step %s, %d\n", h, ex.Client, ex.Step, ex.Status)
	}
	// Output:
	// "6.6.6.6, 1.2.3.4" → client "1.2.3.4", step allowed, 200
	// "1.2.3.4, garbage" → client "", step unknown, 429
}

// Serve the administration of a service's protectors over HTTP, and lift
// a ban through it: the next request is served.
func ExampleHandler() {
	store := protect.NewMemoryStore(protect.MemoryOptions{})
	defer store.Close()
	api := newProtector(protect.Config{Store: store, Namespace: "api:"})
	defer api.Close()
	login := newProtector(protect.Config{Store: store, Namespace: "login:", MaxRequests: 1, BanLimit: 1})
	defer login.Close()
	ctx := context.Background()
	client := netip.MustParseAddr("203.0.113.7")
	login.VerifyAddr(ctx, client)
	login.VerifyAddr(ctx, client) // past the login guard's ban limit

	srv := httptest.NewServer(admin.Handler(api, login)) // no authentication: keep it private
	defer srv.Close()
	res, _ := http.Get(srv.URL + "/v1/bans")
	var bans []admin.BanRecord
	json.NewDecoder(res.Body).Decode(&bans)
	res.Body.Close()
	fmt.Println(res.StatusCode, bans[0].Key, bans[0].BanNamespace, bans[0].Reason)
	d, _ := api.VerifyAddr(ctx, client)
	fmt.Println("api:", d.Status)

	req, _ := http.NewRequest("DELETE", srv.URL+"/v1/bans?target=203.0.113.7&by=ops", nil)
	res, _ = http.DefaultClient.Do(req)
	res.Body.Close()
	d, _ = api.VerifyAddr(ctx, client)
	fmt.Println(res.StatusCode, "api:", d.Status)
	// Output:
	// 200 203.0.113.7 protect: stream passed the ban limit of 1 requests
	// api: banned
	// 200 api: allowed
}
