package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/httpprotect/protect/crowdsec"
	"github.com/httpprotect/protect/envconfig"
)

// crowdsecOptions reads HTTP_PROTECT_CROWDSEC_URL, _KEY and _INTERVAL;
// nil when none is set. A URL without a key (or a key without a URL) is
// an error that names both: the LAPI would refuse every poll, and
// protectd would run without the decisions it was told to enforce. A URL
// with HTTP_PROTECT_CROWDSEC_MACHINE_ID but no key pushes protect's bans
// and pulls nothing (csmachine.go).
func crowdsecOptions(env []string) (*crowdsec.Options, error) {
	var url, key, interval, machine string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case envCrowdsecURL:
			url = strings.TrimSpace(v)
		case envCrowdsecKey:
			key = strings.TrimSpace(v)
		case envCrowdsecInterval:
			interval = strings.TrimSpace(v)
		case envCrowdsecMachineID:
			machine = strings.TrimSpace(v)
		}
	}
	if url != "" && key == "" && interval == "" && machine != "" {
		return nil, nil
	}
	if url == "" && key == "" {
		if interval != "" {
			return nil, fmt.Errorf("%s=%q: set %s and %s too", envCrowdsecInterval, interval, envCrowdsecURL, envCrowdsecKey)
		}
		return nil, nil
	}
	if url == "" || key == "" {
		// Never quote the key.
		return nil, fmt.Errorf("%s and %s: set both (the key is a bouncer's, from cscli bouncers add NAME), or neither", envCrowdsecURL, envCrowdsecKey)
	}
	// A machine pushes protect's bans to the same LAPI: taking them back
	// would refuse a lifted client until the machine's deletion lands.
	opts := &crowdsec.Options{URL: url, Key: key, SkipPushed: machine != ""}
	if interval != "" {
		d, err := envconfig.EnvDuration(interval)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", envCrowdsecInterval, interval, err)
		}
		opts.Interval = d
	}
	if _, err := crowdsec.New(*opts); err != nil {
		name, v := envCrowdsecURL, url
		if strings.Contains(err.Error(), "Interval") {
			name, v = envCrowdsecInterval, interval
		}
		return nil, fmt.Errorf("%s=%q: %w", name, v, err)
	}
	return opts, nil
}

// startBouncer makes the bouncer s.crowdsec asks for, logging to log,
// adds its list to s.cfg.BlockLists (and, with the challenge on, its
// list of captcha decisions, which get the page; without it, captcha
// decisions are ignored), and when poll is set polls the LAPI
// until ctx ends or the returned stop is called; stop waits for the
// poller. Without s.crowdsec it does nothing.
func startBouncer(ctx context.Context, s *settings, log *slog.Logger, poll bool) (stop func()) {
	if s.crowdsec == nil {
		return func() {}
	}
	opts := *s.crowdsec
	opts.Logger = log
	if s.cfg.Challenge == nil {
		// No list of captcha decisions is in force: keep none, nor build
		// their set, nor count one too wide as an error of the bouncer.
		opts.ChallengeTypes = []string{}
	}
	b, err := crowdsec.New(opts) // checked by crowdsecOptions
	if err != nil {
		log.Error("crowdsec", "err", err.Error())
		return func() {}
	}
	s.cfg.BlockLists = append(s.cfg.BlockLists, b.BlockList())
	if s.cfg.Challenge != nil { // captcha decisions: the page; without the challenge, ignored
		s.cfg.BlockLists = append(s.cfg.BlockLists, b.ChallengeList())
	}
	if !poll {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.Run(ctx)
	}()
	return func() { cancel(); wg.Wait() }
}
