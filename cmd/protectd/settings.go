package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/crowdsec"
	"github.com/httpprotect/protect/envconfig"
	"github.com/httpprotect/protect/redisstore"
)

// protectd's own settings, beside protect's HTTP_PROTECT_* names.
const (
	ownListen     = "LISTEN"
	ownPlans      = "PLANS"
	ownGRPCListen = "GRPC_LISTEN"
	envListen     = envconfig.Prefix + ownListen
	envPlans      = envconfig.Prefix + ownPlans
	envGRPCListen = envconfig.Prefix + ownGRPCListen
	defaultListen = "127.0.0.1:8089"
)

// protectd's CrowdSec settings (crowdsec.go).
const (
	ownCrowdsecURL      = "CROWDSEC_URL"
	ownCrowdsecKey      = "CROWDSEC_KEY"
	ownCrowdsecInterval = "CROWDSEC_INTERVAL"
	envCrowdsecURL      = envconfig.Prefix + ownCrowdsecURL
	envCrowdsecKey      = envconfig.Prefix + ownCrowdsecKey
	envCrowdsecInterval = envconfig.Prefix + ownCrowdsecInterval
)

// settings is everything protectd is configured with.
type settings struct {
	cfg    protect.Config
	listen string
	// plans by name, as X-Protect-Plan names them; empty without
	// HTTP_PROTECT_PLANS.
	plans map[string]*protect.Plan
	// grpcListen is where the gRPC services listen (grpc.go); empty: off.
	grpcListen string
	// admin is where the admin API listens (admin.go).
	admin adminSettings
	// crowdsec configures the bouncer that feeds CrowdSec's decisions to
	// the block lists (crowdsec.go); nil without HTTP_PROTECT_CROWDSEC_URL.
	crowdsec *crowdsec.Options
	// sinks hand the bans on (sinks.go).
	sinks sinkSettings
	// stateFile is HTTP_PROTECT_STATE_FILE, the memory store's file; ""
	// without one.
	stateFile string
}

// loadSettings reads env ("NAME=value" entries, as os.Environ gives them;
// a later entry wins). It is as strict as envconfig.Read: an
// HTTP_PROTECT_ name that is neither protect's nor protectd's is an
// error. Every error quotes the setting and its value.
//
// Every problem is reported at once, protect's and protectd's own, so
// that a first run with three mistakes needs one fix, not three runs.
func loadSettings(env []string) (settings, error) {
	return loadSettingsLog(env, slog.Default())
}

// loadSettingsLog is loadSettings with the store that it opens (a state
// file's memory store, a Redis client) logging to log.
func loadSettingsLog(env []string, log *slog.Logger) (settings, error) {
	var errs []error
	cfg, err := envconfig.Read(env, envconfig.Options{
		Prefix: envconfig.Prefix,
		Own:    append([]string{ownListen, ownPlans, ownGRPCListen, ownAdminListen, ownAdminToken, ownAdminOrigins, ownCrowdsecURL, ownCrowdsecKey, ownCrowdsecInterval}, sinkNames...),
		Redis:  redisstore.Options{Logger: log},
		Memory: protect.MemoryOptions{Logger: log},
	})
	if err != nil {
		errs = append(errs, err)
	}
	vars := make(map[string]string, 2)
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && (k == envListen || k == envPlans || k == envGRPCListen || k == envBlockLists || k == envStateFile) {
			vars[k] = v
		}
	}
	s := settings{cfg: cfg, listen: defaultListen, plans: map[string]*protect.Plan{}, stateFile: strings.TrimSpace(vars[envStateFile])}
	if err == nil && cfg.TrustedProxies == nil && cfg.ProxyCount == 0 && !cfg.TrustUnixSocket {
		// protectd sits behind a proxy by design: without trusted
		// proxies every request would be counted as the proxy itself,
		// one shared limit for every client, and banned together.
		errs = append(errs, fmt.Errorf("%s is not set: name the proxies that ask protectd (such as 127.0.0.1 for nginx on this host), or write none if clients reach protectd directly", envconfig.Prefix+"TRUSTED_PROXIES"))
	}
	if v := strings.TrimSpace(vars[envListen]); v != "" {
		if err := checkListen(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", envListen, v, err))
		} else {
			s.listen = v
		}
	}
	if v := strings.TrimSpace(vars[envGRPCListen]); v != "" {
		if err := checkGRPCListen(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", envGRPCListen, v, err))
		} else {
			s.grpcListen = v
		}
	}
	if v := strings.TrimSpace(vars[envPlans]); v != "" {
		if s.plans, err = envconfig.LoadPlans(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", envPlans, shorten(v), err))
		}
	}
	errs = append(errs, listFileErrors(vars[envBlockLists])...)
	if s.admin, err = loadAdminSettings(env); err != nil {
		errs = append(errs, err)
	}
	if s.crowdsec, err = crowdsecOptions(env); err != nil {
		errs = append(errs, err)
	}
	for _, name := range []string{crowdsec.Name, crowdsec.ChallengeName} {
		if s.crowdsec != nil && slices.ContainsFunc(s.cfg.BlockLists, func(l protect.BlockList) bool { return l.Name == name }) {
			errs = append(errs, fmt.Errorf("%s=%q: a list named %q, the name %s's decisions take; name the file otherwise with NAME=PATH",
				envBlockLists, shorten(strings.TrimSpace(vars[envBlockLists])), name, envCrowdsecURL))
		}
	}
	if s.sinks, err = loadSinks(env); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		if s.cfg.Store != nil { // dialed, never to be used
			s.cfg.Store.Close()
		}
		return settings{}, errors.Join(errs...)
	}
	return s, nil
}

// publicListen says why addr (host:port, already checked) may be
// reached from other machines, or "" when it is loopback only. protectd
// decides who is banned: anyone who can reach it can ask about any
// address and spend a client's budget with forged X-Forwarded-For when
// the peer is trusted.
func publicListen(addr string) string {
	if _, ok := unixPath(addr); ok {
		return ""
	}
	host, _, _ := net.SplitHostPort(addr)
	if host == "" {
		return "it listens on every interface"
	}
	if host == "localhost" {
		return ""
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Sprintf("%s is a name, which may resolve to a public address", host)
	}
	if a.Unmap().IsLoopback() {
		return ""
	}
	if a.IsUnspecified() {
		return "it listens on every interface"
	}
	return fmt.Sprintf("%s is not a loopback address", host)
}

// checkListen accepts host:port with a numeric port (an empty host
// listens on every interface, which the caller asked for), or
// unix:PATH (listen.go).
func checkListen(v string) error {
	if path, ok := unixPath(v); ok {
		return checkUnixPath(path)
	}
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("want host:port, such as %s, or unix:PATH", defaultListen)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q: want a number from 0 to 65535", port)
	}
	return nil
}

// envBlockLists is protect's variable of the block lists, which
// loadSettings checks against HTTP_PROTECT_CROWDSEC_URL.
const envBlockLists = envconfig.Prefix + "BLOCKLISTS"

// envStateFile is protect's variable of the memory store's state file,
// which -check names.
const envStateFile = envconfig.Prefix + "STATE_FILE"

// shorten cuts a long value (inline plans, a list of block lists) for an
// error message.
func shorten(v string) string {
	const max = 60
	if len(v) > max {
		return v[:max] + "…"
	}
	return v
}

// listFileErrors says which list files of HTTP_PROTECT_BLOCKLISTS (its
// value v) cannot be read, under the variable's name: protect.New would
// stop at the first, naming it BlockLists[i], and only once every other
// setting is right. The entries are parsed as envconfig parses them; an
// entry that does not parse is envconfig's error already.
func listFileErrors(v string) []error {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	cfg, err := envconfig.Read([]string{envBlockLists + "=" + v}, envconfig.Options{})
	if err != nil {
		return nil
	}
	var errs []error
	for _, l := range cfg.BlockLists {
		if l.Path == "" {
			continue
		}
		if _, err := os.Stat(l.Path); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: list %q: %w", envBlockLists, shorten(strings.TrimSpace(v)), l.Name, err))
		}
	}
	return errs
}
