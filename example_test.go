package protect_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/httpprotect/protect"
)

// Mount the middleware in front of everything: every path is covered,
// unmatched ones included.
func Example() {
	p, err := protect.New(protect.Config{
		MaxRequests:    2,
		TrustedProxies: []string{"10.0.0.0/8"}, // your load balancer
		Logger:         slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	h := p.Middleware(mux)

	for range 3 {
		r := httptest.NewRequest("GET", "/hello", nil)
		r.RemoteAddr = "10.0.0.1:5555"                 // the load balancer…
		r.Header.Set("X-Forwarded-For", "203.0.113.7") // …forwarding a client
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "protect";r=1;t=10 Retry-After: ""
	// 200 RateLimit: "protect";r=0;t=10 Retry-After: ""
	// 429 RateLimit: "protect";r=0;t=10 Retry-After: "10"
}

// Verify returns one decision; Refused is the only question to ask of it.
func ExampleProtector_VerifyAddr() {
	p, _ := protect.New(protect.Config{MaxRequests: 2, BanLimit: 3, Logger: slog.New(slog.DiscardHandler)})
	defer p.Close()

	// An IPv4-mapped address is the same client as its IPv4 form.
	for _, a := range []string{"192.0.2.1", "::ffff:192.0.2.1", "192.0.2.1", "192.0.2.1"} {
		d, _ := p.VerifyAddr(context.Background(), netip.MustParseAddr(a))
		fmt.Println(d.Key, d.Count, d.Status, d.Refused(), d.StatusCode())
	}
	// Output:
	// 192.0.2.1 1 allowed false 200
	// 192.0.2.1 2 allowed false 200
	// 192.0.2.1 3 limited true 429
	// 192.0.2.1 4 banned true 403
}

// IPv6 clients are counted per /64: rotating addresses does not help.
func ExampleProtector_VerifyAddr_ipv6() {
	p, _ := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler)})
	defer p.Close()
	for _, a := range []string{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9"} {
		d, _ := p.VerifyAddr(context.Background(), netip.MustParseAddr(a))
		fmt.Println(d.Key, d.Count)
	}
	// Output:
	// 2001:db8:1:2::/64 1
	// 2001:db8:1:2::/64 2
}

// After authentication, count the consumer rather than the address.
func ExampleProtector_VerifyKey() {
	p, _ := protect.New(protect.Config{MaxRequests: 1, Namespace: "consumer:", Logger: slog.New(slog.DiscardHandler)})
	defer p.Close()
	for _, k := range []string{"cus_alpha", "cus_alpha", "cus_bravo", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"} {
		d, _ := p.VerifyKey(context.Background(), k)
		fmt.Println(d.Key, d.Status)
	}
	// Output:
	// cus_alpha allowed
	// cus_alpha limited
	// cus_bravo allowed
	// ~78a08441f4314f0a2833cfe58c62e555 allowed
}

// Operators ban ranges and lift bans by any address inside them.
func ExampleProtector_Ban() {
	p, _ := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler)})
	defer p.Close()
	ctx := context.Background()

	p.Ban(ctx, "198.51.100.0/24", protect.BanOptions{For: 2 * time.Hour, Reason: "scanner", By: "ops"})
	for _, a := range []string{"198.51.100.7", "198.51.101.7"} {
		d, _ := p.VerifyAddr(ctx, netip.MustParseAddr(a))
		fmt.Println(a, d.Status, d.RetryAfter.Round(time.Minute))
	}
	lifted, _ := p.Lift(ctx, "198.51.100.0/24", "ops")
	fmt.Println("lifted", lifted[0].Key, lifted[0].Reason)
	// Output:
	// 198.51.100.7 banned 2h0m0s
	// 198.51.101.7 allowed 0s
	// lifted 198.51.100.0/24 scanner
}

// A plan holds a consumer to every limit at once: here 1 request a second
// with bursts of 3, and 5 a day. A refused request is charged nothing.
func ExampleProtector_VerifyConsumer() {
	plan, err := protect.NewPlan("starter",
		protect.Rate{Name: "burst", Limit: 1, Period: time.Second, Burst: 3},
		protect.Quota{Name: "daily", Limit: 5, Period: protect.Daily})
	if err != nil {
		panic(err)
	}
	p, _ := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler)})
	defer p.Close()

	for range 4 {
		d, _ := p.VerifyConsumer(context.Background(), "acme", plan)
		fmt.Println(d.Status, d.Policy, d.Remaining)
	}
	// Output:
	// allowed burst 2
	// allowed burst 1
	// allowed burst 0
	// limited burst 0
}

// Check decides without counting; Penalize counts what the handler
// decided was a failure. An attempt refused because the client has no
// failure left counts too (as Middleware with CountStatus counts it), so
// that a client that keeps trying reaches BanLimit.
func ExampleProtector_Penalize() {
	p, _ := protect.New(protect.Config{MaxRequests: 2, BanLimit: 4, Logger: slog.New(slog.DiscardHandler)})
	defer p.Close()
	ctx := context.Background()
	r := httptest.NewRequest("POST", "/login", nil)
	r.RemoteAddr = "203.0.113.7:4711"

	for _, failed := range []bool{false, true, true, true, true, true} {
		if d, _ := p.Check(ctx, r); d.Refused() {
			d, _ = p.Penalize(ctx, r, 1)
			fmt.Println("refused", d.Count, d.Status)
			continue
		}
		if failed { // a wrong password, say
			d, _ := p.Penalize(ctx, r, 1)
			fmt.Println("failure", d.Count, d.Status)
			continue
		}
		fmt.Println("served")
	}
	// Output:
	// served
	// failure 1 allowed
	// failure 2 allowed
	// refused 3 limited
	// refused 4 limited
	// refused 5 banned
}

// staticList is a live BlockSource of one set, as code of yours might
// keep one (a set it replaces whole, under an atomic pointer, when its
// source changes).
type staticList struct{ set *protect.BlockSet }

func (l staticList) BlockSet() *protect.BlockSet { return l.set }

// A block list refuses its addresses before anything is counted; a safe
// network inside a listed range still passes.
func ExampleBlockList() {
	set := protect.NewBlockSet([]protect.BlockEntry{
		{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Note: "scanner"},
	})
	p, err := protect.New(protect.Config{
		SafeNetworks: []string{"198.51.100.10"},
		BlockLists:   []protect.BlockList{{Name: "mine", Source: staticList{set}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	for _, a := range []string{"198.51.100.7", "198.51.100.10", "203.0.113.1"} {
		d, _ := p.VerifyAddr(context.Background(), netip.MustParseAddr(a))
		fmt.Println(a, d.Status, d.StatusCode())
	}
	m := p.BlockListMatches(netip.MustParseAddr("198.51.100.7"))
	fmt.Println(m[0].List, m[0].Entry, m[0].Note)
	// Output:
	// 198.51.100.7 blocked 403
	// 198.51.100.10 safe 200
	// 203.0.113.1 allowed 200
	// mine 198.51.100.0/24 scanner
}
