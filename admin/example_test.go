package admin_test

import (
	"context"
	"fmt"
	"log/slog"
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
