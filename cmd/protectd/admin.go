package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/envconfig"
)

// The admin API's settings.
const (
	ownAdminListen  = "ADMIN_LISTEN"
	ownAdminToken   = "ADMIN_TOKEN"
	ownAdminOrigins = "ADMIN_ORIGINS"
	envAdminListen  = envconfig.Prefix + ownAdminListen
	envAdminToken   = envconfig.Prefix + ownAdminToken
	envAdminOrigins = envconfig.Prefix + ownAdminOrigins
	// minTokenLen keeps a token out of reach of guessing: 16 random
	// characters are far beyond what a network can try.
	minTokenLen = 16
)

// adminSettings say where protectd serves admin.Handler. The zero value
// serves it nowhere, the default.
type adminSettings struct {
	// listen is "" (off), host:port, or unix:/path.
	listen string
	token  string
	// origins are the dashboard's origins behind a proxy
	// (admin.DashboardConfig.Origins); nil: its own.
	origins []string
}

// socket is the path of a unix listen address; "" for TCP.
func (a adminSettings) socket() string {
	path, _ := strings.CutPrefix(a.listen, "unix:")
	if path == a.listen {
		return ""
	}
	return path
}

// loadAdminSettings reads HTTP_PROTECT_ADMIN_LISTEN, _TOKEN and _ORIGINS
// from env. _ORIGINS is a list (commas or spaces) of the origins a
// browser opens the dashboard at, each scheme://host[:port]; any other
// entry is an error naming it, for an origin misspelt would lock every
// browser out, or a path after it would never match.
// A TCP address needs a token: anyone who reaches the port could
// otherwise lift every ban. A unix socket may go without one, for the
// socket file's permissions (0600, protectd's user) decide who connects.
// A token that is set but blank (empty, or only whitespace) is refused.
func loadAdminSettings(env []string) (adminSettings, error) {
	var a adminSettings
	tokenSet := false
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case envAdminListen:
			a.listen = strings.TrimSpace(v)
		case envAdminToken:
			a.token, tokenSet = v, true
		case envAdminOrigins:
			if strings.TrimSpace(v) == "" {
				return adminSettings{}, fmt.Errorf("%s is set but blank: name the dashboard's origins (https://admin.example.com) or unset it", envAdminOrigins)
			}
			for _, o := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
				origin, err := admin.ParseOrigin(o)
				if err != nil {
					return adminSettings{}, fmt.Errorf("%s: %w", envAdminOrigins, err)
				}
				a.origins = append(a.origins, origin)
			}
		}
	}
	// A blank token is a mistake, never a choice: an empty one would
	// leave a TCP listener open, and one of spaces can never be sent
	// (HTTP trims a header value), so no request would ever match it.
	if tokenSet && strings.TrimSpace(a.token) == "" {
		what := "empty"
		if a.token != "" {
			what = fmt.Sprintf("%d characters, all whitespace", len(a.token))
		}
		return adminSettings{}, fmt.Errorf("%s is set but blank (%s): set it to a secret token (openssl rand -hex 32) or unset it", envAdminToken, what)
	}
	// HTTP trims a header value: a token with whitespace at either end
	// would never match what a client sends.
	if a.token != strings.TrimSpace(a.token) {
		return adminSettings{}, fmt.Errorf("%s has whitespace at its start or end, which no request can send: remove it", envAdminToken)
	}
	if a.token != "" && len(a.token) < minTokenLen {
		return adminSettings{}, fmt.Errorf("%s: %d characters: want at least %d (openssl rand -hex 32 makes one)", envAdminToken, len(a.token), minTokenLen)
	}
	switch {
	case a.listen == "":
		return a, nil
	case strings.HasPrefix(a.listen, "unix:"):
		if a.socket() == "" {
			return adminSettings{}, fmt.Errorf("%s=%q: want unix:/path/to/socket or host:port", envAdminListen, a.listen)
		}
		// Absolute, as every other listen value's socket must be: a
		// relative one lands in whatever directory protectd started in,
		// where protectctl does not look.
		if err := checkUnixPath(a.socket()); err != nil {
			return adminSettings{}, fmt.Errorf("%s=%q: %w", envAdminListen, a.listen, err)
		}
	default:
		if err := checkListen(a.listen); err != nil {
			return adminSettings{}, fmt.Errorf("%s=%q: %w, or unix:/path/to/socket", envAdminListen, a.listen, err)
		}
		if a.token == "" {
			return adminSettings{}, fmt.Errorf("%s=%q is a TCP address: set %s to a secret token (openssl rand -hex 32), which protectctl sends as -token, or listen on unix:/path",
				envAdminListen, a.listen, envAdminToken)
		}
	}
	return a, nil
}

// adminServer is the admin API's listener, while it serves.
type adminServer struct {
	srv    *http.Server
	served chan error
}

// startAdmin serves admin.Dashboard(p) as a says, or nothing when a is
// off (nil, nil): the admin API under /v1/ and the web dashboard at /,
// both behind a's token, the dashboard showing the keys of refused.
func startAdmin(a adminSettings, p *protect.Protector, refused *admin.Refused, log *slog.Logger) (*adminServer, error) {
	if a.listen == "" {
		return nil, nil
	}
	ln, err := listenAdmin(a)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", envAdminListen, a.listen, err)
	}
	s := &adminServer{srv: newServer(admin.Dashboard(admin.DashboardConfig{Token: a.token, Origins: a.origins, Refused: refused, Logger: log}, p), log), served: make(chan error, 1)}
	// Lists and lifts of many bans take longer than a proxy's question.
	s.srv.WriteTimeout = 5 * time.Minute
	if why := publicListen(a.listen); a.socket() == "" && why != "" {
		log.Warn("admin API reachable from other machines: its token and the dashboard's session cookie cross the network in clear; keep it on loopback, a private network or a unix socket",
			"addr", a.listen, "why", why)
	}
	log.Info("admin API listening", "addr", ln.Addr().String(), "token", a.token != "")
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// listenAdmin opens the listener. A socket file left by a protectd that
// is gone is replaced; one that answers is another protectd's, and an
// error. Whoever connects to the socket administers the bans: it is
// protectd's user's alone.
func listenAdmin(a adminSettings) (net.Listener, error) {
	return listenMode(a.listen, 0o600)
}

// shutdown stops the admin API, waiting for requests in flight until ctx
// ends.
func (s *adminServer) shutdown(ctx context.Context) error {
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, shutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
