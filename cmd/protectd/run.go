package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/httpprotect/protect/envconfig"
	"github.com/httpprotect/protect/redisstore"
)

const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usage is what a mistake prints, on stderr; -h prints the manual
// (doc.go) instead.
const usage = `usage: protectd [-check]

Settings come from the HTTP_PROTECT_* environment; "protectd -h" prints the manual.

flags:
`

// run is protectd: main only calls it, and tests drive it in-process. It
// serves until ctx ends, then shuts down gracefully.
func run(ctx context.Context, args, env []string, stdout, stderr io.Writer) (code int) {
	fs := flag.NewFlagSet("protectd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	check := fs.Bool("check", false, "check the settings and the plans file, print them, and exit")
	// The flag package calls Usage itself before Parse returns, to the
	// FlagSet's output, which would print it a second time after -h.
	// Usage is printed here instead, once: the manual on stdout when asked
	// for, the short usage on stderr after a mistake.
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, manual)
			return exitOK
		}
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "protectd: unexpected argument %q (settings come from the environment; see protectd -h)\n", fs.Arg(0))
		return exitUsage
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	// The process's own loggers (the log package's, go-redis's, grpc's:
	// processlog.go) write to this run's log while it runs.
	defer processLog.use(log.Handler(), *check)()
	s, err := loadSettingsLog(env, log)
	if err != nil {
		fmt.Fprintf(stderr, "protectd: %v\n", err)
		return exitUsage
	}
	defer startBouncer(ctx, &s, log, !*check)()
	v, err := newVerifier(s, log)
	if err != nil {
		fmt.Fprintf(stderr, "protectd: %v\n", err)
		return exitUsage
	}
	defer func() {
		v.p.Close()
		if s.cfg.Store != nil { // dialed from HTTP_PROTECT_REDIS_URL or opened on HTTP_PROTECT_STATE_FILE: ours to close
			// A state file's close writes what is left: what it fails
			// to write is lost with the process.
			if err := s.cfg.Store.Close(); err != nil {
				log.Error("store close", "err", err.Error())
				code = exitFailure
			}
		}
	}()
	store := "memory"
	if _, ok := s.cfg.Store.(*redisstore.Store); ok {
		store = "redis"
	}
	if why := publicListen(s.listen); why != "" {
		log.Warn("listen address reachable from other machines: keep protectd on loopback or a unix socket beside its proxy",
			"addr", s.listen, "why", why)
	}
	reached, storeErr := reachStore(ctx, s.cfg.Store, s.stateFile)
	if storeErr == nil { // a store that does not answer cannot be asked for its setup either
		checkSetup(ctx, s.cfg.Store, log)
	}
	if *check {
		c := v.p.Config()
		fmt.Fprintf(stdout, "listen %s, %s store, %d plans, max_requests %d, ttl %v, ban_limit %d, trusted_proxies %q\n",
			s.listen, store, len(s.plans), c.MaxRequests, c.TTL, c.BanLimit, c.TrustedProxies)
		if cc := c.Challenge; cc != nil {
			fmt.Fprintf(stdout, "challenge: after %d, difficulty %d, pass_ttl %v\n", cc.After, cc.Difficulty, cc.PassTTL)
		}
		if storeErr != nil {
			fmt.Fprintf(stderr, "protectd: %v\n", storeErr)
			return exitFailure
		}
		fmt.Fprintf(stdout, "store: %s\n", reached)
		return exitOK
	}
	if storeErr != nil {
		log.Error("store unreachable at start: decisions follow "+envconfig.Prefix+"ON_STORE_ERROR until it answers", "err", storeErr.Error(), "policy", v.p.Config().OnStoreError.String())
	} else {
		log.Info("store", "store", reached)
	}
	defer reloadOnHangup(ctx, v.p, log)()
	ln, err := listen(s.listen)
	if err != nil {
		fmt.Fprintf(stderr, "protectd: %s=%q: %v\n", envListen, s.listen, err)
		return exitFailure
	}
	var g *grpcService // nil while HTTP_PROTECT_GRPC_LISTEN is off
	if s.grpcListen != "" {
		if g, err = startGRPC(s.grpcListen, v, log); err != nil {
			ln.Close()
			fmt.Fprintf(stderr, "protectd: %v\n", err)
			return exitFailure
		}
		defer g.kill()
	}
	stopSinks, err := startSinks(ctx, s.sinks, v.p, log)
	if err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "protectd: %v\n", err)
		return exitFailure
	}
	defer stopSinks()
	srv := newServer(newHandler(v), log)
	log.Info("listening", "addr", ln.Addr().String(), "store", store, "plans", len(s.plans))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	adm, err := startAdmin(s.admin, v.p, v.refused, log)
	if err != nil {
		fmt.Fprintf(stderr, "protectd: %v\n", err)
		srv.Close()
		return exitFailure
	}
	defer adm.shutdown(context.WithoutCancel(ctx))
	select {
	case err := <-served:
		log.Error("serve", "err", err.Error())
		return exitFailure
	case err := <-g.done():
		log.Error("grpc serve", "err", err.Error())
		return exitFailure
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	g.stop(sctx)
	if err := srv.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err.Error())
		return exitFailure
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", "err", err.Error())
		return exitFailure
	}
	return exitOK
}
