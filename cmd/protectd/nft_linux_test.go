//go:build linux

package main

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/netnstest"
	"github.com/httpprotect/protect/internal/nftsink"
)

// TestNFTSinkReachesTheKernel runs protectd's nftables sink, as
// HTTP_PROTECT_NFT starts it, against the sets of a server namespace
// that a client namespace connects to: a ban, then its lift, reach the
// kernel within the poll interval and one listing.
func TestNFTSinkReachesTheKernel(t *testing.T) {
	pair := netnstest.New(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skipf("no nft command: %v", err)
	}
	if _, err := pair.Exec(pair.Server, "nft", "-f", "../../internal/nftsink/testdata/protect.nft"); err != nil {
		t.Fatal(err)
	}
	app := pair.Serve(pair.Server, pair.ServerAddr.String()+":0")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := protect.New(protect.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	s, err := loadSinks([]string{envNFT + "=inet protect ban4 ban6"})
	if err != nil {
		t.Fatal(err)
	}
	s.nftOpts.NetNS = pair.Fd(pair.Server)
	stop, err := startSinks(context.Background(), s, p, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	until := func(what string, want bool) time.Duration {
		t.Helper()
		return pair.WaitReach(what, app, want, 200*time.Millisecond, 10*nftsink.DefaultEvery)
	}
	until("before any ban", true)
	ctx := context.Background()
	for _, target := range []string{pair.ClientAddr.String(), "10.213.0.0/24"} {
		if _, err := p.Ban(ctx, target, protect.BanOptions{For: time.Hour}); err != nil {
			t.Fatal(err)
		}
		t.Logf("ban on %s held by the kernel after %v (poll interval %v)", target, until("banned", false), nftsink.DefaultEvery)
		if _, err := p.Lift(ctx, target, "test"); err != nil {
			t.Fatal(err)
		}
		t.Logf("lift of %s held by the kernel after %v", target, until("lifted", true))
	}
}
