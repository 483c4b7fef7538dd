// Command consumer shows two limits that compose: a coarse limit on the
// client address before authentication (it stops key guessing), and a
// precise limit on the authenticated customer after it (it enforces the
// customer's plan, however many addresses or keys the customer uses).
//
//	go run ./examples/consumer
//	curl -i -H 'X-API-Key: key_acme_1' http://127.0.0.1:8081/v1/things
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
	"time"

	"github.com/httpprotect/protect"
)

// keys stands in for your key table: Acme has two keys and one budget.
var keys = map[string]string{
	"key_acme_1": "acme",
	"key_acme_2": "acme",
	"key_globex": "globex",
}

type customerKey struct{}

// authenticate resolves the API key to a customer, or answers 401.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		customer, ok := keys[r.Header.Get("X-API-Key")]
		if !ok {
			http.Error(w, "invalid API key", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), customerKey{}, customer)))
	})
}

// newHandler builds address limit → authentication → customer limit → app.
func newHandler(logger *slog.Logger) (http.Handler, func(), error) {
	// Both protectors get one store: one ban list, as a service has.
	store := protect.NewMemoryStore(protect.MemoryOptions{})
	byAddr, err := protect.New(protect.Config{Store: store, MaxRequests: 20, TTL: 10 * time.Second, Namespace: "addr:", Logger: logger})
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	byCustomer, err := protect.New(protect.Config{
		Store:       store,
		MaxRequests: 3,
		TTL:         10 * time.Second,
		BanLimit:    -1, // a paying customer is limited, never banned
		Namespace:   "customer:",
		Logger:      logger,
		// Count the customer resolved by authenticate: an identifier, not
		// the API key, so that the key never reaches a store key name.
		KeyFunc: func(r *http.Request) (string, bool) {
			c, ok := r.Context().Value(customerKey{}).(string)
			return c, ok
		},
	})
	if err != nil {
		byAddr.Close()
		store.Close()
		return nil, nil, err
	}
	app := http.NewServeMux()
	app.HandleFunc("GET /v1/things", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "things for %s\n", r.Context().Value(customerKey{}))
	})
	h := byAddr.Middleware(authenticate(byCustomer.Middleware(app)))
	return h, func() { byAddr.Close(); byCustomer.Close(); store.Close() }, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*addr, os.Stdout, logger); err != nil {
		logger.Error("consumer", "error", err)
		os.Exit(1)
	}
}

func run(addr string, out io.Writer, logger *slog.Logger) error {
	h, closeAll, err := newHandler(logger)
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
	fmt.Fprintf(out, `consumer demo on http://%[1]s
per address: 20 requests without a 10s pause; per customer: 3

try:
  for k in key_acme_1 key_acme_2 key_acme_1 key_acme_2 key_globex; do
    curl -s -o /dev/null -w "$k %%{http_code}\n" -H "X-API-Key: $k" http://%[1]s/v1/things; done
`, addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
