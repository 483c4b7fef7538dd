// Command basic is a demo server protected by protect on its default
// in-memory store, with small limits so that you can watch a client go
// from allowed to limited to banned with curl.
//
//	go run ./examples/basic            # listens on 127.0.0.1:8080
//	go run ./examples/basic -addr 127.0.0.1:9090
package main

import (
	"context"
	"encoding/json"
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

// demoConfig has limits small enough to reach by hand.
func demoConfig(logger *slog.Logger) protect.Config {
	return protect.Config{
		TTL:         10 * time.Second,
		MaxRequests: 5,
		BanLimit:    10,
		BanDuration: time.Minute,
		Logger:      logger,
	}
}

// newHandler returns the demo: the application ("/" greets) behind p's
// middleware, and the admin page "/bans" (the current bans as JSON)
// beside it, outside the protector: an operator must be able to read the
// ban list while banned, and a page of the protector's own should not
// count towards anyone's limit. Anyone who reaches the port can read it,
// so a real service serves it on an admin port or behind its own
// authentication.
func newHandler(p *protect.Protector) http.Handler {
	app := http.NewServeMux()
	app.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello from behind protect")
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /bans", func(w http.ResponseWriter, r *http.Request) {
		bans, err := p.Bans(r.Context(), protect.BanFilter{})
		if err != nil {
			http.Error(w, "cannot list bans", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(bans)
	})
	mux.Handle("/", p.Middleware(app))
	return mux
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*addr, os.Stdout, logger); err != nil {
		logger.Error("basic", "error", err)
		os.Exit(1)
	}
}

func run(addr string, out io.Writer, logger *slog.Logger) error {
	p, err := protect.New(demoConfig(logger))
	if err != nil {
		return err
	}
	defer p.Close()
	srv := &http.Server{Addr: addr, Handler: withMetrics(p, newHandler(p)), ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()

	fmt.Fprintf(out, `protect demo on http://%[1]s (in-memory store)
limits: 5 requests without a 10s pause, then 429; past 10 without a pause,
banned for 1m

try:
  curl -i http://%[1]s/
  for i in $(seq 8); do curl -s -o /dev/null -w '%%{http_code} ' http://%[1]s/; done; echo
      # 200 200 200 200 200 429 429 429: limited, not banned; pause 10s and
      # it starts over. Run the loop twice without a pause to be banned.
  curl -s http://%[1]s/bans      # the ban list, as JSON
  curl -s http://%[1]s/metrics   # what protect decided, for Prometheus

/bans and /metrics are served outside the protector (they count for
nobody's limit and answer while you are banned); anyone who reaches this
port can read them.

Ctrl-C stops it.
`, addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
