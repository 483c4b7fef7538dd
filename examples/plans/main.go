// Command plans holds each paying customer to its plan: a token bucket
// ("5 requests a second, bursts of 10") and a monthly quota, however many
// API keys or machines the customer uses, on every instance alike.
//
// It is the story of background/per-customer-token-buckets.txt in Go:
//
//   - API keys map to customers: Acme has two keys and one bucket.
//   - Two plans: free (1 a second, bursts of 5, 100 a month) and pro (5 a
//     second, bursts of 10, 100,000 a month).
//   - An address gate runs before authentication, so that nobody can
//     guess keys at full speed; the plan runs after it, on the customer.
//   - /health is outside every limiter.
//
// Refusals are 429 with a machine-readable code: rate_limited (slow down:
// retry after Retry-After, a second or so) or quota_exceeded (the month is
// used up: Retry-After runs to the first of next month; do not retry).
//
//	go run ./examples/plans
//	curl -i -H 'Authorization: Bearer key_acme_1' http://127.0.0.1:8084/v1/things
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/httpprotect/protect"
)

// keys stands in for your key table: Acme has two keys and one bucket.
var keys = map[string]string{
	"key_acme_1": "acme",
	"key_acme_2": "acme",
	"key_globex": "globex",
}

// customers stands in for your billing records: each customer's plan.
var customers = map[string]string{"acme": "pro", "globex": "free"}

// newPlans makes the two plans. In a real service they come from
// configuration: protect.ParsePlans reads the plans file protectd reads.
func newPlans() (map[string]*protect.Plan, error) {
	free, err := protect.NewPlan("free",
		protect.Rate{Name: "burst", Limit: 1, Period: time.Second, Burst: 5},
		protect.Quota{Name: "monthly", Limit: 100, Period: protect.Monthly})
	if err != nil {
		return nil, err
	}
	pro, err := protect.NewPlan("pro",
		protect.Rate{Name: "burst", Limit: 5, Period: time.Second, Burst: 10},
		protect.Quota{Name: "monthly", Limit: 100_000, Period: protect.Monthly})
	if err != nil {
		return nil, err
	}
	return map[string]*protect.Plan{"free": free, "pro": pro}, nil
}

type customerKey struct{}

// authenticate resolves the API key to a customer, or answers 401.
// Unknown keys never reach the plans: nobody can fill the store with junk.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		customer, ok := keys[key]
		if !ok {
			http.Error(w, "invalid API key", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), customerKey{}, customer)))
	})
}

// newHandler builds /health, and address gate → authentication → plan →
// API. clock is the protectors' clock (time.Now; tests move a fake one).
func newHandler(clock func() time.Time, logger *slog.Logger) (http.Handler, func(), error) {
	plans, err := newPlans()
	if err != nil {
		return nil, nil, err
	}
	// Both protectors get one store: one ban list, as a service has.
	store := protect.NewMemoryStore(protect.MemoryOptions{Clock: clock})
	// Before authentication, per address: 20 requests without a pause of
	// 10s. It stops key guessing; it is not what customers pay for.
	gate, err := protect.New(protect.Config{Store: store, MaxRequests: 20, TTL: 10 * time.Second, Namespace: "addr:", Clock: clock, Logger: logger})
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	// After authentication, per customer: the customer's plan. The
	// customer is an identifier from your records, never the API key, so
	// a key never reaches a store key name.
	byPlan, err := protect.New(protect.Config{
		Store:     store,
		Namespace: "plan:",
		Clock:     clock,
		Logger:    logger,
		ConsumerFunc: func(r *http.Request) (string, *protect.Plan, bool) {
			customer, ok := r.Context().Value(customerKey{}).(string)
			if !ok {
				return "", nil, false
			}
			// An unknown plan is nil, and a nil plan is refused: never
			// unlimited.
			return customer, plans[customers[customer]], true
		},
	})
	if err != nil {
		gate.Close()
		store.Close()
		return nil, nil, err
	}
	api := http.NewServeMux()
	api.HandleFunc("GET /v1/things", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "things for %s\n", r.Context().Value(customerKey{}))
	})
	mux := http.NewServeMux()
	// Registered outside the protectors on purpose: health checks pass
	// whatever the limits, and whatever the store.
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("/v1/", gate.Middleware(authenticate(byPlan.Middleware(api))))
	return mux, func() { gate.Close(); byPlan.Close(); store.Close() }, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8084", "listen address")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*addr, os.Stdout, logger); err != nil {
		logger.Error("plans", "error", err)
		os.Exit(1)
	}
}

func run(addr string, out io.Writer, logger *slog.Logger) error {
	h, closeAll, err := newHandler(time.Now, logger)
	if err != nil {
		return err
	}
	defer closeAll()
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Fprintf(out, `plans demo on http://%[1]s
acme (pro): 5 a second, bursts of 10, 100000 a month; globex (free): 1 a second, bursts of 5, 100 a month

try:
  for i in $(seq 12); do
    curl -s -o /dev/null -w "%%{http_code} " -H "Authorization: Bearer key_acme_$((i %% 2 + 1))" http://%[1]s/v1/things; done; echo
  curl -i -H 'Authorization: Bearer key_globex' http://%[1]s/v1/things
`, addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
