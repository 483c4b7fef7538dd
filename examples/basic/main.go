// Command basic is a demo server protected by protect on its default
// in-memory store, with small limits so that you can watch a client go
// from allowed to limited to banned with curl.
//
//	go run ./examples/basic            # listens on 127.0.0.1:8080, its admin API on 127.0.0.1:8081
//	go run ./examples/basic -addr 127.0.0.1:9090 -admin 127.0.0.1:9091
//
// The admin API is package admin's Handler, on a loopback port of its
// own: the ban list in protectctl's -json schema (GET /v1/bans), and
// lifts (DELETE /v1/bans?target=…), which protectctl -server sends.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
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

// newHandler returns the demo's application ("/" greets) behind p's
// middleware. The admin API is not among its paths: it has no
// authentication of its own, so it gets a loopback port of its own
// (newAdmin), where it is outside the protector too: an operator reads
// and lifts bans while banned, and counts towards nobody's limit.
func newHandler(p *protect.Protector) http.Handler {
	app := http.NewServeMux()
	app.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello from behind protect")
	})
	return p.Middleware(app)
}

// newAdmin is the admin API of p, for its own port.
func newAdmin(p *protect.Protector) http.Handler { return admin.Handler(p) }

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	adminAddr := flag.String("admin", "127.0.0.1:8081", "the admin API's listen address: keep it on loopback")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*addr, *adminAddr, os.Stdout, logger); err != nil {
		logger.Error("basic", "error", err)
		os.Exit(1)
	}
}

func run(addr, adminAddr string, out io.Writer, logger *slog.Logger) error {
	p, err := protect.New(demoConfig(logger))
	if err != nil {
		return err
	}
	defer p.Close()
	srv := &http.Server{Addr: addr, Handler: withMetrics(p, newHandler(p)), ReadHeaderTimeout: 5 * time.Second}
	adm := &http.Server{Addr: adminAddr, Handler: newAdmin(p), ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
		adm.Shutdown(shutdown)
	}()

	fmt.Fprintf(out, `protect demo on http://%[1]s (in-memory store)
limits: 5 requests without a 10s pause, then 429; past 10 without a pause,
banned for 1m

try:
  curl -i http://%[1]s/
  for i in $(seq 8); do curl -s -o /dev/null -w '%%{http_code} ' http://%[1]s/; done; echo
      # 200 200 200 200 200 429 429 429: limited, not banned; pause 10s and
      # it starts over. Run the loop twice without a pause to be banned.
  curl -s http://%[1]s/metrics   # what protect decided, for Prometheus

the admin API (package admin), on http://%[2]s:
  curl -s http://%[2]s/v1/bans                                # the ban list, as protectctl -json writes it
  curl -s -X DELETE 'http://%[2]s/v1/bans?target=127.0.0.1'   # lift your ban
  protectctl -server http://%[2]s bans                        # the same, with protectctl

/metrics and the admin API are served outside the protector (they count
for nobody's limit and answer while you are banned). The admin API has no
authentication of its own: whoever reaches its port lists and lifts bans,
so it listens on loopback.

Ctrl-C stops it.
`, addr, adminAddr)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	aln, err := net.Listen("tcp", adminAddr)
	if err != nil {
		ln.Close()
		return err
	}
	admErr := make(chan error, 1)
	go func() { admErr <- adm.Serve(aln) }()
	err = srv.Serve(ln)
	adm.Close() // when the application stops serving, so does its admin API
	if aerr := <-admErr; !errors.Is(aerr, http.ErrServerClosed) {
		return aerr
	}
	if !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
