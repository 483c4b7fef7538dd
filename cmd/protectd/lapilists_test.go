package main

import (
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/testclock"
)

// TestLAPIBlockLists: with HTTP_PROTECT_LAPI_BLOCKLISTS, a bouncer gets
// the block lists' entries beside the bans, each with its note (or the
// list's name) as its scenario, for a lease (lapiListLease); without it,
// the bans alone.
func TestLAPIBlockLists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drop.txt")
	if err := os.WriteFile(path, []byte("192.0.2.0/24 ; SBL000001\n198.51.100.7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock := testclock.New()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := protect.New(protect.Config{Clock: clock.Now, Logger: quiet,
		BlockLists: []protect.BlockList{{Name: "drop", Path: path, Format: protect.FormatSpamhaus}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	r := &lapiRig{p: p, clock: clock}
	host := r.ban(t, "203.0.113.7", protect.BanOptions{For: time.Hour, Reason: "credential stuffing"})
	dHost := dec(host, "Ip", "203.0.113.7", "credential stuffing", "1h0m0s", "2026-11-29T13:00:00Z")
	listed := func(value, scope, scenario string) string {
		b := protect.Ban{Key: protect.Key{Prefix: mustPrefix(t, value)}}
		return dec(b, scope, value, scenario, "24h0m0s", "2026-11-30T12:00:00Z")
	}
	const path0 = "/v1/decisions/stream?startup=true"

	r.h = lapiOf(p, nil, []string{keyA}, clock.Now, quiet)
	r.get(t, path0, keyA, 200, stream(nil, []string{dHost}))

	r.h = lapiOf(p, blockListBans(p), []string{keyA}, clock.Now, quiet)
	r.get(t, path0, keyA, 200, stream(nil, []string{
		listed("192.0.2.0/24", "Range", "SBL000001"), listed("198.51.100.7", "Ip", "blocklist:drop"), dHost}))

	for _, tc := range []struct {
		env  []string
		want bool
		err  string
	}{
		{[]string{envLAPIListen + "=127.0.0.1:0", envLAPIKeys + "=" + keyA, envLAPILists + "=true"}, true, ""},
		{[]string{envLAPIListen + "=127.0.0.1:0", envLAPIKeys + "=" + keyA}, false, ""},
		{[]string{envLAPILists + "=true"}, false, envLAPILists + " is set without " + envLAPIListen},
		{[]string{envLAPIListen + "=127.0.0.1:0", envLAPIKeys + "=" + keyA, envLAPILists + "=yes please"}, false, envLAPILists + `="yes please": want true or false`},
	} {
		s, err := loadSinks(tc.env)
		if got := errText(err); got != tc.err || s.lapiLists != tc.want {
			t.Errorf("loadSinks(%q) = lapiLists %v, error %q; want %v, %q", tc.env, s.lapiLists, got, tc.want, tc.err)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func mustPrefix(t *testing.T, v string) netip.Prefix {
	t.Helper()
	if a, err := netip.ParseAddr(v); err == nil {
		return netip.PrefixFrom(a, a.BitLen())
	}
	p, err := netip.ParsePrefix(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLAPIBlockListLease: a block list's entry is given for a lease and
// sent again, its lease renewed, each half lease; so an entry removed
// from a list while a bouncer's pulls go to another instance (which
// cannot tell it of the removal) is not renewed, and leaves the bouncer
// at its lease's end.
func TestLAPIBlockListLease(t *testing.T) {
	clock := testclock.New() // 2026-11-29T12:00:00Z, the start of a half lease
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := protect.New(protect.Config{Clock: clock.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	entry := func(v string) protect.Ban {
		return protect.Ban{Key: protect.Key{Prefix: mustPrefix(t, v)}, Reason: "blocklist:drop", Source: protect.SourceList, By: "drop"}
	}
	listed := []protect.Ban{entry("192.0.2.7"), entry("198.51.100.7")}
	lists := func() []protect.Ban { return append([]protect.Ban(nil), listed...) }
	d := func(v, duration, until string) string {
		return dec(entry(v), "Ip", v, "blocklist:drop", duration, until)
	}
	a := &lapiRig{p: p, clock: clock, h: lapiOf(p, lists, []string{keyA}, clock.Now, quiet)}
	b := &lapiRig{p: p, clock: clock, h: lapiOf(p, lists, []string{keyA}, clock.Now, quiet)}
	const path = "/v1/decisions/stream"
	a.getOn(t, 1, path+"?startup=true", keyA, 200, stream(nil, []string{
		d("192.0.2.7", "24h0m0s", "2026-11-30T12:00:00Z"), d("198.51.100.7", "24h0m0s", "2026-11-30T12:00:00Z")}))
	clock.Advance(time.Hour)
	a.getOn(t, 1, path, keyA, 200, stream(nil, nil))

	// 198.51.100.7 leaves the list; the next pull goes to the other
	// instance, which never made the lists the bouncer holds.
	listed = listed[:1]
	b.getOn(t, 2, path, keyA, 200, stream(nil, []string{d("192.0.2.7", "23h0m0s", "2026-11-30T12:00:00Z")}))
	b.getOn(t, 2, path, keyA, 200, stream(nil, nil))

	// A half lease on, what is listed is sent again to the end of the
	// next; 198.51.100.7 is not, and leaves the bouncer at 12:00.
	clock.Advance(11 * time.Hour)
	b.getOn(t, 2, path, keyA, 200, stream(nil, []string{d("192.0.2.7", "24h0m0s", "2026-12-01T00:00:00Z")}))
	b.getOn(t, 2, path, keyA, 200, stream(nil, nil))
	// A removal an instance can tell is a deletion, as before.
	listed = nil
	b.getOn(t, 2, path, keyA, 200, stream([]string{d("192.0.2.7", "24h0m0s", "2026-12-01T00:00:00Z")}, nil))
}
