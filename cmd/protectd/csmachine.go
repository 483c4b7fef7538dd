package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/httpprotect/protect/crowdsec"
	"github.com/httpprotect/protect/envconfig"
	"github.com/httpprotect/protect/internal/redact"
)

// protectd as a CrowdSec machine: with HTTP_PROTECT_CROWDSEC_MACHINE_ID
// and _PASSWORD it pushes its bans to the LAPI of HTTP_PROTECT_CROWDSEC_URL
// (crowdsec.Machine), so that CrowdSec's bouncers and cscli see them.
const (
	ownCrowdsecMachineID = "CROWDSEC_MACHINE_ID"
	ownCrowdsecPassword  = "CROWDSEC_PASSWORD"
	envCrowdsecMachineID = envconfig.Prefix + ownCrowdsecMachineID
	envCrowdsecPassword  = envconfig.Prefix + ownCrowdsecPassword
)

// machineOptions reads HTTP_PROTECT_CROWDSEC_MACHINE_ID and _PASSWORD with
// HTTP_PROTECT_CROWDSEC_URL; nil when neither is set. An error names the
// variable and never quotes the password.
func machineOptions(env []string) (*crowdsec.MachineOptions, error) {
	var url, key, id, password string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case envCrowdsecURL:
			url = strings.TrimSpace(v)
		case envCrowdsecKey:
			key = strings.TrimSpace(v)
		case envCrowdsecMachineID:
			id = strings.TrimSpace(v)
		case envCrowdsecPassword:
			password = v // a password may hold any character
		}
	}
	switch {
	case id == "" && password == "":
		return nil, nil
	case id == "":
		return nil, fmt.Errorf("%s is set without %s: set both, or neither", envCrowdsecPassword, envCrowdsecMachineID)
	case password == "":
		return nil, fmt.Errorf("%s is needed with %s: the machine's password, from cscli machines add %s --password PW", envCrowdsecPassword, envCrowdsecMachineID, id)
	case url == "":
		return nil, fmt.Errorf("%s is set without %s: the LAPI protectd pushes its bans to", envCrowdsecMachineID, envCrowdsecURL)
	}
	o := &crowdsec.MachineOptions{URL: url, MachineID: id, Password: password}
	// With a bouncer key, crowdsecOptions checks the same URL and says
	// what is wrong with it.
	if _, err := crowdsec.NewMachine(*o); err != nil && key == "" {
		return nil, fmt.Errorf("%s=%q: %w", envCrowdsecURL, redact.URL(url), err)
	}
	return o, nil
}

// startMachine pushes src's bans to the LAPI of o until ctx ends; done is
// closed then.
func startMachine(ctx context.Context, o crowdsec.MachineOptions, src crowdsec.EventSource, log *slog.Logger) (done <-chan struct{}, err error) {
	o.Logger = log
	m, err := crowdsec.NewMachine(o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envCrowdsecURL, err)
	}
	if done, err = m.Start(ctx, src); err != nil {
		return nil, fmt.Errorf("%s: %w: the machine pushes the journal's bans", envCrowdsecMachineID, err)
	}
	log.Info("crowdsec machine", "url", redact.URL(o.URL), "machine_id", o.MachineID)
	return done, nil
}
