//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/needs"
	"github.com/httpprotect/protect/internal/netnstest"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/redisstore"
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
	l := lapiOf(p, nil, []string{keyA}, p.Config().Clock, slog.New(slog.NewTextHandler(io.Discard, nil)))
	until, svc := startFirewallBouncer(t, bin, pair, l, l.connContext)

	ctx := context.Background()
	if _, err := p.Ban(ctx, pair.ClientAddr.String(), protect.BanOptions{For: time.Hour, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("ban enforced by the bouncer after %v (poll interval %v)", until("banned", false), bouncerPoll)
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
	time.Sleep(2 * bouncerPoll)
	set, _ := pair.Exec(pair.Server, "nft", "list", "set", "ip", "crowdsec", "crowdsec-blacklists")
	t.Logf("the bouncer's set after a ban on 10.213.0.0/24 (the client reaches the server: %v):\n%s", pair.Reaches(svc, 300*time.Millisecond), set)
}

// balancer hands each request to the next of its instances in turn, as a
// load balancer in front of several protectd does; down keeps requests
// from one.
type balancer struct {
	mu   sync.Mutex
	ls   []*lapi
	down []bool
	next int
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	for b.down[b.next%len(b.ls)] {
		b.next++
	}
	l := b.ls[b.next%len(b.ls)]
	b.next++
	b.mu.Unlock()
	l.ServeHTTP(w, r)
}

func (b *balancer) set(i int, l *lapi, down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l != nil {
		b.ls[i] = l
	}
	b.down[i] = down
}

// TestCrowdSecFirewallBouncerBalanced: the bouncer behind a balancer that
// hands its pulls in turn to two instances on one Redis, each with its
// own store client: a ban and its lift reach the kernel whichever
// instance answers, and so does a lift made while one instance is down,
// once a new one takes its place.
func TestCrowdSecFirewallBouncerBalanced(t *testing.T) {
	bin := csBouncer(t)
	addr := redistest.RealAddr(t)
	pair := netnstest.New(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ns := redistest.NamespaceAt(t, addr)
	instance := func() (*protect.Protector, *lapi) {
		rc := redistest.Dial(addr)
		st := redisstore.New(rc, redisstore.Options{Logger: quiet})
		p, err := protect.New(protect.Config{Store: st, Namespace: ns, BanNamespace: ns, StoreTimeout: 5 * time.Second, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close(); st.Close(); rc.Close() })
		return p, lapiOf(p, nil, []string{keyA}, p.Config().Clock, quiet)
	}
	p, l1 := instance()
	_, l2 := instance()
	b := &balancer{ls: []*lapi{l1, l2}, down: []bool{false, false}}
	until, _ := startFirewallBouncer(t, bin, pair, b, l1.connContext)

	ctx := context.Background()
	client := pair.ClientAddr.String()
	if _, err := p.Ban(ctx, client, protect.BanOptions{For: time.Hour, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("ban enforced after %v", until("banned", false))
	b.set(0, nil, true)
	if _, err := p.Lift(ctx, client, "test"); err != nil {
		t.Fatal(err)
	}
	_, l3 := instance()
	b.set(1, nil, true) // the lift is left for the new instance to send
	b.set(0, l3, false)
	t.Logf("lift made while the first instance was down, enforced after %v", until("lifted", true))
	b.set(1, nil, false)
	if _, err := p.Ban(ctx, client, protect.BanOptions{For: time.Hour, Reason: "again"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("second ban enforced after %v", until("banned again", false))
}

// bouncerPoll is how often the firewall bouncer pulls the stream.
const bouncerPoll = time.Second

// startFirewallBouncer serves h as the Local API in pair's server
// namespace, runs the bouncer there against it, waits until it made its
// table. It returns a function that waits until the client reaches the
// server's test service (want) or not and says how long that took, and
// the service's address.
func startFirewallBouncer(t *testing.T, bin string, pair *netnstest.Pair, h http.Handler, connContext func(context.Context, net.Conn) context.Context) (func(what string, want bool) time.Duration, string) {
	t.Helper()
	api := pair.Listen(pair.Server, "127.0.0.1:0")
	srv := newServer(h, slog.Default())
	srv.ConnContext = connContext // as startSinks serves it
	go srv.Serve(api)
	t.Cleanup(func() { srv.Close() })
	svc := pair.Serve(pair.Server, pair.ServerAddr.String()+":0")

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
`, dir, bouncerPoll, dir, api.Addr(), keyA)
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
	until := func(what string, want bool) time.Duration {
		t.Helper()
		return pair.WaitReach(what, svc, want, 300*time.Millisecond, 5*bouncerPoll)
	}
	until("before any ban", true)
	return until, svc
}
