//go:build linux

package nftsink

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// reload loads the test's ruleset anew in the server's namespace, as
// systemctl reload nftables does (flush ruleset, then the file), with
// each set's flags line followed by extra.
func (r *rig) reload(t *testing.T, flags, extra string) {
	t.Helper()
	rules, err := os.ReadFile("testdata/protect.nft")
	if err != nil {
		t.Fatal(err)
	}
	text := "flush ruleset\n" + strings.ReplaceAll(string(rules), "flags interval, timeout", flags+"\n"+extra)
	path := filepath.Join(t.TempDir(), "reload.nft")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Exec(r.Server, "nft", "-f", path); err != nil {
		t.Fatal(err)
	}
}

// A reload of the ruleset that gives the sets a default timeout leaves
// permanent bans permanent: the refill after it writes them with an
// explicit zero timeout, which the set's default does not replace.
func TestReloadWithDefaultTimeoutKeepsPermanentBans(t *testing.T) {
	r := newRig(t)
	perm := r.ban(t, "192.0.2.7", protect.BanOptions{Permanent: true})
	hour := r.ban(t, "198.51.100.0/24", protect.BanOptions{For: time.Hour})
	if res := r.sync(t, r.sink); res.Added != 2 {
		t.Fatalf("first Sync = %+v, want 2 added", res)
	}
	r.reload(t, "flags interval, timeout", "timeout 1m")
	if res := r.sync(t, r.sink); res != (Result{Added: 2, Read: true, Transactions: 1}) {
		t.Fatalf("Sync after the reload = %+v, want %+v", res, Result{Added: 2, Read: true, Transactions: 1})
	}
	for _, e := range r.listSet(t, "ban4") {
		switch {
		case e.Addr == perm.Key.String():
			if e.Timeout != 0 || e.Expires != 0 {
				t.Errorf("permanent ban %s in a set with timeout 1m: element timeout %ds, expires %ds, want none", perm.Key, e.Timeout, e.Expires)
			}
		case e.Prefix == hour.Key.String():
			if e.Expires < 3500 {
				t.Errorf("1-hour ban %s: element expires in %ds, want about 3600", hour.Key, e.Expires)
			}
		default:
			t.Errorf("set ban4 element %+v: want %s or %s", e, perm.Key, hour.Key)
		}
	}
	// The sink reads the set back as it wrote it: nothing to change.
	s := r.open(t)
	if res := r.sync(t, s); res != (Result{Kept: 2, Read: true}) {
		t.Errorf("Sync of a new sink = %+v, want %+v", res, Result{Kept: 2, Read: true})
	}
}

// An element that took the set's default timeout is read as expiring,
// not as permanent: a permanent ban on it is written again.
func TestElementWithTheDefaultTimeoutIsNotPermanent(t *testing.T) {
	r := newRig(t)
	r.reload(t, "flags interval, timeout", "timeout 1m")
	if _, err := r.Exec(r.Server, "nft", "add", "element", "inet", "protect", "ban4", "{ 192.0.2.7 }"); err != nil {
		t.Fatal(err)
	}
	r.ban(t, "192.0.2.7", protect.BanOptions{Permanent: true})
	if res := r.sync(t, r.sink); res != (Result{Added: 1, Deleted: 1, Read: true, Transactions: 1}) {
		t.Errorf("Sync over an element with the default timeout = %+v, want %+v", res, Result{Added: 1, Deleted: 1, Read: true, Transactions: 1})
	}
	if els := r.listSet(t, "ban4"); len(els) != 1 || els[0].Addr != "192.0.2.7" || els[0].Expires != 0 {
		t.Errorf("set ban4 = %+v, want 192.0.2.7 with no timeout", els)
	}
}

// A reload that makes a set the sink cannot keep right (no interval
// flag) is refused at the next refill with an error that names the set,
// and nothing is written.
func TestReloadWithoutIntervalIsRefused(t *testing.T) {
	r := newRig(t)
	r.ban(t, "192.0.2.7", protect.BanOptions{Permanent: true})
	r.sync(t, r.sink)
	r.reload(t, "flags timeout", "")
	bans, err := admin.New(r.p).Bans(context.Background(), admin.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	before := r.sink.Transactions()
	_, err = r.sink.Sync(context.Background(), bans)
	want := "nftsink: set inet protect ban4: lacks flags interval (a range ban would hold one address); the sink needs nft add set inet protect ban4 '{ type ipv4_addr; flags interval, timeout; }'"
	if err == nil || err.Error() != want {
		t.Errorf("Sync after a reload without flags interval = %v, want %q", err, want)
	}
	if got := r.sink.Transactions(); got != before {
		t.Errorf("transactions after the refused refill = %d, want %d", got, before)
	}
}

// An element added by hand to a set of many bans costs one deletion and
// nothing else, though the kernel's timeouts end seconds after the bans
// (as those of a large batch do: the kernel starts each element's clock
// as it inserts it).
func TestHandAddedElementIsTheOnlyChange(t *testing.T) {
	r := newRig(t)
	const n = 2000
	now := time.Now()
	bans := manyBans(n, now)
	var b strings.Builder
	b.WriteString("add element inet protect ban4 { ")
	for i, x := range bans {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s timeout %ds", x.Key.Prefix.Addr(), int(x.Left(now).Seconds())+5)
	}
	b.WriteString(" }\nadd element inet protect ban4 { 192.0.2.99 }\n")
	path := filepath.Join(t.TempDir(), "elements.nft")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Exec(r.Server, "nft", "-f", path); err != nil {
		t.Fatal(err)
	}
	res, err := r.sink.Sync(context.Background(), bans)
	if want := (Result{Deleted: 1, Kept: n, Read: true, Transactions: 1}); err != nil || res != want {
		t.Errorf("Sync of %d bans with one element added by hand = %+v, %v; want %+v", n, res, err, want)
	}
}
