//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/httpprotect/protect/internal/netnstest"
)

// TestHelperProtectctl is protectctl itself when the test binary runs
// as a helper inside a namespace (PROTECTCTL_HELPER set): the arguments
// after "--" are protectctl's.
func TestHelperProtectctl(t *testing.T) {
	if os.Getenv("PROTECTCTL_HELPER") == "" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(run(args, os.Stdout, os.Stderr))
}

// TestNFTSync runs protectctl nft sync, as cron would, in a server
// namespace whose Redis holds the bans: the sets follow the bans, and
// the client's connections are dropped while it is banned.
func TestNFTSync(t *testing.T) {
	pair := netnstest.New(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skipf("no nft command: %v", err)
	}
	// Redis, in the server's namespace, where protectctl runs.
	m := miniredis.NewMiniRedis()
	if err := netnstest.In(pair.Server, func() error { return m.StartAddr("127.0.0.1:0") }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctl := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := pair.Command(pair.Server, append([]string{exe, "-test.run=^TestHelperProtectctl$", "--", "-redis", "redis://" + m.Addr()}, args...)...)
		cmd.Env = append(os.Environ(), "PROTECTCTL_HELPER=1")
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	sync := func(args ...string) nftResult {
		t.Helper()
		code, out, errs := ctl(append([]string{"nft", "sync", "-json"}, args...)...)
		var r nftResult
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("protectctl nft sync %v = exit %d, %s %s; want exit 0 and JSON", args, code, out, errs)
		}
		return r
	}

	code, _, errs := ctl("nft", "sync")
	want := "protectctl: nftsink: table inet protect: not found in the ruleset; create it (nft add table inet protect), see docs/firewall.md\n"
	if code != 1 || errs != want {
		t.Fatalf("protectctl nft sync without a table = exit %d, %q; want exit 1, %q", code, errs, want)
	}
	if code, _, errs := ctl("ban", "-for", "1h", pair.ClientAddr.String()); code != 0 {
		t.Fatalf("protectctl ban = exit %d: %s", code, errs)
	}
	if got, want := sync("-create"), (nftResult{Sets: "inet protect ban4 ban6", Added: 1, Transactions: 1}); got != want {
		t.Errorf("first nft sync -create = %+v, want %+v", got, want)
	}
	out, err := pair.Exec(pair.Server, "nft", "list", "set", "inet", "protect", "ban4")
	if err != nil || !strings.Contains(string(out), pair.ClientAddr.String()+" timeout 59m") {
		t.Errorf("set ban4 after nft sync = %s (%v), want %s with the time left of a 1h ban", out, err, pair.ClientAddr)
	}
	if got, want := sync(), (nftResult{Sets: "inet protect ban4 ban6", Kept: 1}); got != want {
		t.Errorf("nft sync again = %+v, want %+v", got, want)
	}
	if code, _, errs := ctl("lift", pair.ClientAddr.String()); code != 0 {
		t.Fatalf("protectctl lift = exit %d: %s", code, errs)
	}
	if got, want := sync(), (nftResult{Sets: "inet protect ban4 ban6", Deleted: 1, Transactions: 1}); got != want {
		t.Errorf("nft sync after a lift = %+v, want %+v", got, want)
	}
	if code, _, errs := ctl("nft", "sync", "-sets", "inet protect"); code != 2 || !strings.Contains(errs, "bad set specification") {
		t.Errorf("nft sync -sets 'inet protect' = exit %d, %q; want exit 2 and the specification's error", code, errs)
	}
}
