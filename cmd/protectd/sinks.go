package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/crowdsec"
	"github.com/httpprotect/protect/envconfig"
	"github.com/httpprotect/protect/internal/nftsink"
	"github.com/httpprotect/protect/internal/redact"
	"github.com/httpprotect/protect/internal/webhook"
	"github.com/httpprotect/protect/store"
)

// protectd's settings for the sinks that hand its bans on: the kernel's
// firewall (nftables), CrowdSec bouncers (the Local API) and a webhook.
const (
	ownNFT           = "NFT"
	ownNFTInterval   = "NFT_INTERVAL"
	ownLAPIListen    = "LAPI_LISTEN"
	ownLAPIKeys      = "LAPI_KEYS"
	ownLAPILists     = "LAPI_BLOCKLISTS"
	ownWebhookURL    = "WEBHOOK_URL"
	ownWebhookSecret = "WEBHOOK_SECRET"
	envNFT           = envconfig.Prefix + ownNFT
	envNFTInterval   = envconfig.Prefix + ownNFTInterval
	envLAPIListen    = envconfig.Prefix + ownLAPIListen
	envLAPIKeys      = envconfig.Prefix + ownLAPIKeys
	envLAPILists     = envconfig.Prefix + ownLAPILists
	envWebhookURL    = envconfig.Prefix + ownWebhookURL
	envWebhookSecret = envconfig.Prefix + ownWebhookSecret
)

// sinkNames are the names of sinkSettings, which loadSettings declares.
var sinkNames = []string{ownNFT, ownNFTInterval, ownLAPIListen, ownLAPIKeys, ownLAPILists,
	ownWebhookURL, ownWebhookSecret, ownCrowdsecMachineID, ownCrowdsecPassword}

// sinkSettings configure the sinks; the zero value runs none.
type sinkSettings struct {
	nft      bool
	nftOpts  nftsink.Options
	nftEvery time.Duration
	// lapiListen is the Local API's address; empty: none.
	lapiListen string
	lapiKeys   []string
	// lapiLists hands the block lists' entries to bouncers too
	// (HTTP_PROTECT_LAPI_BLOCKLISTS).
	lapiLists bool
	// webhook posts the journal's events; a zero URL: none.
	webhook webhook.Options
	// machine pushes the bans to a CrowdSec LAPI (csmachine.go); nil: none.
	machine *crowdsec.MachineOptions
}

// loadSinks reads the sinks' settings from env (a later entry wins).
func loadSinks(env []string) (sinkSettings, error) {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			switch k {
			case envNFT, envNFTInterval, envLAPIListen, envLAPIKeys, envLAPILists,
				envWebhookURL, envWebhookSecret:
				vars[k] = v
			}
		}
	}
	var s sinkSettings
	if v := strings.TrimSpace(vars[envNFT]); v != "" {
		o, on, err := nftsink.ParseSpec(v)
		if err != nil {
			return s, fmt.Errorf("%s=%q: %w", envNFT, v, err)
		}
		s.nft, s.nftOpts = on, o
	}
	s.nftEvery = nftsink.DefaultEvery
	if v := strings.TrimSpace(vars[envNFTInterval]); v != "" {
		d, err := envconfig.EnvDuration(v)
		if err != nil || d < time.Millisecond || d > time.Minute {
			return s, fmt.Errorf("%s=%q: want a duration from 1ms to 1m, such as 500ms or 0.5", envNFTInterval, v)
		}
		s.nftEvery = d
	}
	if v := strings.TrimSpace(vars[envLAPIListen]); v != "" {
		if err := checkListen(v); err != nil {
			return s, fmt.Errorf("%s=%q: %w", envLAPIListen, v, err)
		}
		s.lapiListen = v
		keys, err := lapiKeys(strings.TrimSpace(vars[envLAPIKeys]))
		if err != nil {
			return s, err
		}
		s.lapiKeys = keys
	} else if vars[envLAPIKeys] != "" {
		return s, fmt.Errorf("%s is set without %s: set both, or neither", envLAPIKeys, envLAPIListen)
	}
	if v := strings.TrimSpace(vars[envLAPILists]); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("%s=%q: want true or false", envLAPILists, v)
		}
		if b && s.lapiListen == "" {
			return s, fmt.Errorf("%s is set without %s", envLAPILists, envLAPIListen)
		}
		s.lapiLists = b
	}
	if v := strings.TrimSpace(vars[envWebhookURL]); v != "" {
		s.webhook = webhook.Options{URL: v, Secret: []byte(vars[envWebhookSecret])}
		if len(s.webhook.Secret) == 0 {
			return s, fmt.Errorf("%s is needed with %s: the key its posts are signed with", envWebhookSecret, envWebhookURL)
		}
		// New's errors quote the URL, never the secret.
		if _, err := webhook.New(s.webhook); err != nil {
			return s, fmt.Errorf("%s, %s: %w", envWebhookURL, envWebhookSecret, err)
		}
	} else if vars[envWebhookSecret] != "" {
		return s, fmt.Errorf("%s is set without %s: set both, or neither", envWebhookSecret, envWebhookURL)
	}
	m, err := machineOptions(env)
	s.machine = m
	return s, err
}

// minLAPIKey is the shortest bouncer key accepted: cscli makes keys of
// 32 characters, and a short key is a guessable one.
const minLAPIKey = 16

// lapiKeys reads HTTP_PROTECT_LAPI_KEYS: a comma-separated list, or the
// path of a file (a value starting with / or ./) with one key a line and
// # comments. The error of a value quotes no key.
func lapiKeys(v string) ([]string, error) {
	if v == "" {
		return nil, fmt.Errorf("%s is needed with %s: the bouncers' API keys, a comma list or a file", envLAPIKeys, envLAPIListen)
	}
	var keys []string
	from := envLAPIKeys
	if strings.HasPrefix(v, "/") || strings.HasPrefix(v, "./") {
		b, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", envLAPIKeys, v, err)
		}
		from = fmt.Sprintf("%s=%q", envLAPIKeys, v)
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				keys = append(keys, line)
			}
		}
	} else {
		for _, k := range strings.Split(v, ",") {
			keys = append(keys, strings.TrimSpace(k))
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no key", from)
	}
	for i, k := range keys {
		if len(k) < minLAPIKey || strings.ContainsAny(k, " \t\r\n") {
			return nil, fmt.Errorf("%s: key %d of %d: want at least %d characters and no spaces (cscli bouncers add makes such keys)", from, i+1, len(keys), minLAPIKey)
		}
	}
	return keys, nil
}

// startSinks starts the sinks of s for p's bans. The nftables sink
// checks its sets first, so that a missing set stops protectd at start
// rather than later. stop ends them: the sets stay as they are.
func startSinks(ctx context.Context, s sinkSettings, p *protect.Protector, log *slog.Logger) (stop func(), err error) {
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	var servers []*http.Server
	stop = func() {
		cancel()
		for _, srv := range servers {
			sctx, c := context.WithTimeout(context.Background(), shutdownTimeout)
			srv.Shutdown(sctx)
			c()
		}
		wg.Wait()
	}
	if s.nft {
		o := s.nftOpts
		o.Clock = p.Config().Clock
		sink, err := nftsink.Open(o)
		if err != nil {
			stop()
			return nil, fmt.Errorf("%s=%q: %w", envNFT, o.String(), err)
		}
		log.Info("nftables sink", "sets", o.String(), "every", s.nftEvery.String())
		wg.Add(1)
		go func() {
			defer wg.Done()
			nftsink.Run(ctx, sink, admin.New(p), nftsink.RunOptions{Every: s.nftEvery, Logger: log})
		}()
	}
	if s.lapiListen != "" {
		ln, err := listen(s.lapiListen)
		if err != nil {
			stop()
			return nil, fmt.Errorf("%s=%q: %w", envLAPIListen, s.lapiListen, err)
		}
		j, ok := p.Space().(store.Bookmarks)
		if !ok {
			ln.Close()
			stop()
			return nil, fmt.Errorf("%s: the store (%T) keeps no journal with bookmarks (store.Bookmarks), where each bouncer's place is kept", envLAPIListen, p.Space())
		}
		var lists func() []protect.Ban
		if s.lapiLists {
			lists = blockListBans(p)
		}
		l := newLAPI(admin.New(p), j, lists, s.lapiKeys, p.Config().Clock, log)
		// The first startup pull would read the whole journal to its end;
		// read it now, before any bouncer waits for it.
		wg.Go(func() {
			if _, err := l.head(ctx); err != nil && ctx.Err() == nil {
				log.Warn("crowdsec local api: reading the journal to its end", "err", err.Error())
			}
		})
		srv := newServer(l, log)
		srv.ConnContext = l.connContext
		servers = append(servers, srv)
		log.Info("crowdsec local api", "addr", ln.Addr().String(), "keys", len(s.lapiKeys))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				log.Error("crowdsec local api", "err", err.Error())
			}
		}()
	}
	if s.webhook.URL != "" {
		o := s.webhook
		o.Logger = log
		w, err := webhook.New(o)
		if err != nil {
			stop()
			return nil, fmt.Errorf("%s: %w", envWebhookURL, err)
		}
		done, err := w.Start(ctx, admin.New(p))
		if err != nil {
			stop()
			return nil, fmt.Errorf("%s: %w: the webhook posts the journal's events", envWebhookURL, err)
		}
		log.Info("webhook", "url", redact.URL(o.URL))
		wg.Go(func() { <-done })
	}
	if s.machine != nil {
		done, err := startMachine(ctx, *s.machine, admin.New(p), log)
		if err != nil {
			stop()
			return nil, err
		}
		wg.Go(func() { <-done })
	}
	return stop, nil
}
