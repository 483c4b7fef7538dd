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

// newHandler returns the demo application behind p's middleware: "/"
// greets, "/bans" lists the current bans as JSON.
func newHandler(p *protect.Protector) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello from behind protect")
	})
	mux.HandleFunc("GET /bans", func(w http.ResponseWriter, r *http.Request) {
		bans, err := p.Bans(r.Context(), protect.BanFilter{})
		if err != nil {
			http.Error(w, "cannot list bans", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(bans)
	})
	return p.Middleware(mux)
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
limits: 5 requests without a 10s pause, then 429; past 10, banned for 1m

try:
  curl -i http://%[1]s/
  for i in $(seq 12); do curl -s -o /dev/null -w '%%{http_code} ' http://%[1]s/; done; echo
  curl -s http://%[1]s/bans      # after a pause of 10s if you are only limited
  curl -s http://%[1]s/metrics   # what protect decided, for Prometheus

Ctrl-C stops it.
`, addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
