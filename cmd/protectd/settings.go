package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/envconfig"
)

// protectd's own settings, beside protect's HTTP_PROTECT_* names.
const (
	ownListen     = "LISTEN"
	ownPlans      = "PLANS"
	envListen     = envconfig.Prefix + ownListen
	envPlans      = envconfig.Prefix + ownPlans
	defaultListen = "127.0.0.1:8089"
)

// settings is everything protectd is configured with.
type settings struct {
	cfg    protect.Config
	listen string
	// plans by name, as X-Protect-Plan names them; empty without
	// HTTP_PROTECT_PLANS.
	plans map[string]*protect.Plan
	// sinks hand the bans on (sinks.go).
	sinks sinkSettings
}

// loadSettings reads env ("NAME=value" entries, as os.Environ gives them;
// a later entry wins). It is as strict as envconfig.FromEnv: an
// HTTP_PROTECT_ name that is neither protect's nor protectd's is an
// error. Every error quotes the setting and its value.
func loadSettings(env []string) (settings, error) {
	cfg, err := envconfig.FromEnviron(env, envconfig.Prefix, append([]string{ownListen, ownPlans}, sinkNames...)...)
	if err != nil {
		return settings{}, err
	}
	vars := make(map[string]string, 2)
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && (k == envListen || k == envPlans) {
			vars[k] = v
		}
	}
	s := settings{cfg: cfg, listen: defaultListen, plans: map[string]*protect.Plan{}}
	if v := strings.TrimSpace(vars[envListen]); v != "" {
		if err := checkListen(v); err != nil {
			return settings{}, fmt.Errorf("%s=%q: %w", envListen, v, err)
		}
		s.listen = v
	}
	if v := strings.TrimSpace(vars[envPlans]); v != "" {
		if s.plans, err = envconfig.LoadPlans(v); err != nil {
			return settings{}, fmt.Errorf("%s=%q: %w", envPlans, shorten(v), err)
		}
	}
	if s.sinks, err = loadSinks(env); err != nil {
		return settings{}, err
	}
	return s, nil
}

// checkListen accepts host:port with a numeric port; an empty host
// listens on every interface, which the caller asked for.
func checkListen(v string) error {
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("want host:port, such as %s", defaultListen)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q: want a number from 0 to 65535", port)
	}
	return nil
}

// shorten cuts a long inline plans value for an error message.
func shorten(v string) string {
	const max = 60
	if len(v) > max {
		return v[:max] + "…"
	}
	return v
}
