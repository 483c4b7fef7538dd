// Command login is a login form guarded by its failures, as fail2ban
// guards sshd: successful logins are never counted, however many; 5 wrong
// passwords without a 15-minute pause and the client is refused with 429,
// even with the right password; past 20 (failures and refused attempts
// together) it is banned for an hour, then 2h, 4h, … for a repeat
// offender.
//
//	go run ./examples/login            # listens on 127.0.0.1:8082
//	go run ./examples/login -addr 127.0.0.1:9090
package main

import (
	"context"
	"crypto/subtle"
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

// guardConfig is the login guard: it counts 401s, nothing else.
func guardConfig(logger *slog.Logger) protect.Config {
	return protect.Config{
		Namespace: "login:",
		// A failure is forgotten after 15 minutes without another one.
		TTL: 15 * time.Minute,
		// 5 failures without that pause; the next attempt is refused
		// with 429 and counts too.
		MaxRequests: 5,
		// Past 20: banned for BanDuration, doubling (BanFactor 2) for each
		// further ban within OffenseWindow (7 days), up to 7 days.
		BanLimit:    20,
		BanDuration: time.Hour,
		CountStatus: func(status int) bool { return status == http.StatusUnauthorized },
		Logger:      logger, // every ban is logged with its reason
	}
}

// The demo's one account. A real service keeps password hashes.
const (
	demoUser     = "demo"
	demoPassword = "correct horse battery staple"
)

const form = `<!doctype html>
<title>Log in</title>
<form method="post" action="/login">
<label>User <input name="user" value="demo"></label>
<label>Password <input name="password" type="password"></label>
<button>Log in</button>
</form>
`

// newHandler returns the site: "/" is open, "/login" is behind the guard
// (the form and the check alike, so that a banned client sees its 403
// on the form too). Only the login is guarded: a client out of attempts
// can still read the site, as fail2ban bans only the service's port.
func newHandler(guard *protect.Protector) http.Handler {
	login := http.NewServeMux()
	login.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, form)
	})
	login.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		user, password := r.PostFormValue("user"), r.PostFormValue("password")
		// Both compared in constant time, and both always: the answer
		// must not tell a valid user name from an invalid one.
		okUser := subtle.ConstantTimeCompare([]byte(user), []byte(demoUser))
		okPassword := subtle.ConstantTimeCompare([]byte(password), []byte(demoPassword))
		if okUser&okPassword != 1 {
			// The 401 is what the guard counts.
			http.Error(w, "wrong user name or password", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "welcome, %s\n", user)
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "home; log in at /login\n")
	})
	mux.Handle("/login", guard.Middleware(login))
	return mux
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8082", "listen address")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*addr, os.Stdout, logger); err != nil {
		logger.Error("login", "error", err)
		os.Exit(1)
	}
}

func run(addr string, out io.Writer, logger *slog.Logger) error {
	guard, err := protect.New(guardConfig(logger))
	if err != nil {
		return err
	}
	defer guard.Close()
	srv := &http.Server{Addr: addr, Handler: newHandler(guard), ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()

	fmt.Fprintf(out, `login demo on http://%[1]s/login (user demo, password "correct horse battery staple")
guard: 5 failures without a 15m pause, then 429; past 20, banned for 1h (then 2h, 4h, ...)

try:
  curl -i -d user=demo -d 'password=correct horse battery staple' http://%[1]s/login
  for i in $(seq 22); do curl -s -o /dev/null -w '%%{http_code} ' -d user=demo -d password=guess http://%[1]s/login; done; echo

Ctrl-C stops it.
`, addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
