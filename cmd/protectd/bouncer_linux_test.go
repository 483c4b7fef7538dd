//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/needs"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/netnstest"
)

// csBouncer is the path of Debian's crowdsec-firewall-bouncer, as
// .ci/parts/51-crowdsec-firewall-bouncer.sh unpacks it.
func csBouncer(t *testing.T) string {
	t.Helper()
	return needs.Env(t, "PROTECT_CS_FIREWALL_BOUNCER", "the path of crowdsec-firewall-bouncer; .ci/parts/51-crowdsec-firewall-bouncer.sh sets it")
}

// TestCrowdSecFirewallBouncer points Debian's crowdsec-firewall-bouncer,
// in nftables mode, at protectd's Local API, in a server namespace that
// a client namespace connects to: a ban drops the client's packets
// within the bouncer's poll interval, and its lift lets them through.
func TestCrowdSecFirewallBouncer(t *testing.T) {
	bin := csBouncer(t)
	pair := netnstest.New(t)
	p, err := protect.New(protect.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	api := pair.Listen(pair.Server, "127.0.0.1:0")
	l := newLAPI(admin.New(p), []string{keyA}, p.Config().Clock, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := newServer(l, slog.Default())
	srv.ConnContext = l.connContext // as startSinks serves it
	go srv.Serve(api)
	t.Cleanup(func() { srv.Close() })
	app := pair.Serve(pair.Server, pair.ServerAddr.String()+":0")

	const poll = time.Second
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bouncer.yaml")
	conf := fmt.Sprintf(`mode: nftables
pid_dir: %s
update_frequency: %v
daemonize: false
log_mode: file
log_dir: %s
log_level: info
api_url: http://%s/
api_key: %s
disable_ipv6: true
deny_action: DROP
supported_decisions_types:
  - ban
nftables:
  ipv4:
    enabled: true
    set-only: false
    table: crowdsec
    chain: crowdsec-chain
  ipv6:
    enabled: false
prometheus:
  enabled: false
`, dir, poll, dir, api.Addr(), keyA)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := pair.Command(pair.Server, bin, "-c", cfg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "crowdsec-firewall-bouncer.log"))
			t.Logf("bouncer log:\n%s", log)
		}
	})

	until := func(what string, want bool) time.Duration {
		t.Helper()
		return pair.WaitReach(what, app, want, 300*time.Millisecond, 5*poll)
	}
	// The bouncer is up once it made its table.
	start := time.Now()
	for {
		if _, err := pair.Exec(pair.Server, "nft", "list", "table", "ip", "crowdsec"); err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the bouncer made no table ip crowdsec within 10s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	until("before any ban", true)

	ctx := context.Background()
	if _, err := p.Ban(ctx, pair.ClientAddr.String(), protect.BanOptions{For: time.Hour, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("ban enforced by the bouncer after %v (poll interval %v)", until("banned", false), poll)
	if _, err := p.Lift(ctx, pair.ClientAddr.String(), "test"); err != nil {
		t.Fatal(err)
	}
	t.Logf("lift enforced by the bouncer after %v", until("lifted", true))
	if _, err := p.Ban(ctx, "10.213.0.0/24", protect.BanOptions{For: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// This bouncer's set has no interval flag: it holds a Range decision
	// as one address (docs/firewall.md says so). What it made of one is
	// logged, not asserted.
	time.Sleep(2 * poll)
	set, _ := pair.Exec(pair.Server, "nft", "list", "set", "ip", "crowdsec", "crowdsec-blacklists")
	t.Logf("the bouncer's set after a ban on 10.213.0.0/24 (the client reaches the server: %v):\n%s", pair.Reaches(app, 300*time.Millisecond), set)
}
