// Command recipe is the service of docs/recipes.md: a login form guarded
// by its failures and an API held to each customer's plan, both on one
// Redis, behind nginx on the same host.
//
//	go run ./examples/recipe -redis redis://127.0.0.1:6379/0   # listens on 127.0.0.1:3000
//
// main_test.go runs the page's commands as written: Redis, this service,
// nginx, curl and protectctl.
package main

import (
	"context"
	"crypto/subtle"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/envconfig"
	"github.com/httpprotect/protect/redisstore"
)

// plansFile is the plans file protectd and protectctl read too.
//
//go:embed plans.json
var plansFile []byte

// apiKeys stands in for the service's key table: each key names a
// customer, and each customer has a plan.
var apiKeys = map[string]struct{ customer, plan string }{
	"key_acme_1": {"acme", "pro"},
	"key_acme_2": {"acme", "pro"},
	"key_globex": {"globex", "free"},
}

// trusted is nginx, on this host: the only peer whose X-Forwarded-For
// the service believes.
var trusted = []string{"127.0.0.1"}

// newLoginGuard counts failed logins (401s) per address, nothing else.
func newLoginGuard(store protect.Store) (*protect.Protector, error) {
	return protect.New(protect.Config{
		Store:          store,
		Namespace:      "login:",
		TrustedProxies: trusted,
		CountStatus:    func(status int) bool { return status == http.StatusUnauthorized },
		MaxRequests:    5,                // 5 failures without a 15-minute pause, then 429
		TTL:            15 * time.Minute, // the pause that forgives them
		BanLimit:       10,               // past 10, banned for an hour (2h, 4h, … for a repeat offender)
		BanDuration:    time.Hour,
	})
}

// newAPIGuard holds each customer to its plan; the customer comes from
// the API key, which authenticate checked.
func newAPIGuard(store protect.Store) (*protect.Protector, error) {
	plans, err := envconfig.ParsePlans(plansFile)
	if err != nil {
		return nil, err
	}
	return protect.New(protect.Config{
		Store:          store,
		Namespace:      "api:",
		TrustedProxies: trusted,
		ConsumerFunc: func(r *http.Request) (string, *protect.Plan, bool) {
			key, ok := r.Context().Value(apiKey{}).(string)
			if !ok {
				return "", nil, false // no key: counted by address
			}
			return apiKeys[key].customer, plans[apiKeys[key].plan], true
		},
	})
}

type apiKey struct{}

// authenticate answers 401 for an unknown API key, so that a made-up key
// reaches neither the plans nor the store.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, ok := apiKeys[key]; !ok {
			http.Error(w, "invalid API key", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), apiKey{}, key)))
	})
}

// newHandler is the service: /login behind the login guard, /v1/ behind
// authentication and the API guard.
func newHandler(login, api *protect.Protector) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /login", login.Middleware(http.HandlerFunc(checkPassword)))
	mux.Handle("/v1/", authenticate(api.Middleware(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "things for %s\n", apiKeys[r.Context().Value(apiKey{}).(string)].customer)
		}))))
	return mux
}

// checkPassword is the login form's check; its 401 is what the login
// guard counts.
func checkPassword(w http.ResponseWriter, r *http.Request) {
	okUser := subtle.ConstantTimeCompare([]byte(r.PostFormValue("user")), []byte("demo"))
	okPassword := subtle.ConstantTimeCompare([]byte(r.PostFormValue("password")), []byte("correct horse battery staple"))
	if okUser&okPassword != 1 {
		http.Error(w, "wrong user name or password", http.StatusUnauthorized)
		return
	}
	io.WriteString(w, "welcome, demo\n")
}

func main() {
	def := os.Getenv("HTTP_PROTECT_REDIS_URL")
	if def == "" {
		def = "redis://127.0.0.1:6379/0"
	}
	addr := flag.String("addr", "127.0.0.1:3000", "listen address: nginx's upstream")
	redisURL := flag.String("redis", def, "the Redis both guards share")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *redisURL, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "recipe:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done.
func run(ctx context.Context, addr, redisURL string, out io.Writer) error {
	store, err := redisstore.Dial(redisURL, redisstore.Options{})
	if err != nil {
		return err
	}
	defer store.Close() // after the guards on it
	login, err := newLoginGuard(store)
	if err != nil {
		return err
	}
	defer login.Close()
	api, err := newAPIGuard(store)
	if err != nil {
		return err
	}
	defer api.Close()

	srv := &http.Server{Addr: addr, Handler: newHandler(login, api), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	fmt.Fprintf(out, "recipe on http://%s, Redis %s\n", addr, redisURL)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
