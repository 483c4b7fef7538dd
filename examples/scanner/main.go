// Command scanner is a site with a scanner trap, as CrowdSec's http-probing
// scenario catches scanners: every 404 counts, real pages never do, and a
// client that hits more than 5 paths that do not exist within an hour is
// banned from the whole site for a day (two for a repeat offender). A path
// no honest client asks for on this site, /wp-login.php, bans at once.
//
//	go run ./examples/scanner          # listens on 127.0.0.1:8083
//	go run ./examples/scanner -addr 127.0.0.1:9090
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

// trapConfig is the scanner trap: it counts 404s, nothing else.
func trapConfig(logger *slog.Logger) protect.Config {
	return protect.Config{
		Namespace: "scan:",
		// A 404 is forgotten after an hour without another one.
		TTL: time.Hour,
		// Past 5: banned. BanLimit is below MaxRequests (200 by default),
		// so there is no 429 phase: the sixth probe is served its 404 and
		// bans; the next request, to any path, is refused.
		BanLimit:    5,
		BanDuration: 24 * time.Hour,
		CountStatus: func(status int) bool { return status == http.StatusNotFound },
		Logger:      logger, // every ban is logged with its reason
	}
}

// newHandler returns the site behind the trap. Every path is behind it,
// so a ban closes the whole site to the scanner.
//
// Pages of your own that answer 404 to honest clients (a deleted article,
// a typo in a link) count as well: keep BanLimit above what a reader
// meets in an hour, or answer those with 410 Gone.
func newHandler(trap *protect.Protector) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "home\n")
	})
	mux.HandleFunc("GET /about", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "about us\n")
	})
	// This site is not WordPress: whoever asks for its login form is
	// scanning. Penalize counts past BanLimit in one step; the context
	// outlives a client that hangs up at once.
	mux.HandleFunc("/wp-login.php", func(w http.ResponseWriter, r *http.Request) {
		d, err := trap.Penalize(context.WithoutCancel(r.Context()), r, trap.Config().BanLimit+1)
		if err == nil && d.Refused() {
			d.WriteResponse(w) // 403, Retry-After: the ban it just wrote
			return
		}
		http.NotFound(w, r) // a safe network, a dry run, or the store failing
	})
	return trap.Middleware(mux)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8083", "listen address")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*addr, os.Stdout, logger); err != nil {
		logger.Error("scanner", "error", err)
		os.Exit(1)
	}
}

func run(addr string, out io.Writer, logger *slog.Logger) error {
	trap, err := protect.New(trapConfig(logger))
	if err != nil {
		return err
	}
	defer trap.Close()
	srv := &http.Server{Addr: addr, Handler: newHandler(trap), ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()

	fmt.Fprintf(out, `scanner trap demo on http://%[1]s/
trap: past 5 404s within an hour, banned from every path for 24h; /wp-login.php bans at once

try:
  curl -i http://%[1]s/about
  for p in .env .git/config phpmyadmin/ admin.php backup.zip config.json; do curl -s -o /dev/null -w '%%{http_code} ' http://%[1]s/$p; done; echo
  curl -i http://%[1]s/about     # banned now

Ctrl-C stops it.
`, addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
