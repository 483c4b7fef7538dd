package redisstore

import (
	"errors"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/alicebob/miniredis/v2"
	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/store"
)

// A service publishes its limits under its namespace once it has counted
// a request, and warns loudly when another instance (another store value,
// as another process has) already published other ones for it; within
// one store value the second set of limits is an error. A protector that
// only checks (protectctl) and a dry run publish nothing.
func TestServicePublishesLimits(t *testing.T) {
	m := miniredis.RunT(t)
	logs := &recorder{}
	const warning = "protect: LIMITS DIFFER: another instance counts this namespace with other limits; the counters are shared, so neither set holds. Give each protector its own Namespace."
	instance := func(cfg protect.Config) *instance {
		return startInstance(t, m.Addr(), "svc:", cfg, Options{RangeRefresh: -1}, false)
	}
	a := instance(protect.Config{MaxRequests: 250})
	published := func() (store.Limits, bool) {
		lim, ok, err := a.store.Published(t.Context(), "svc:")
		if err != nil {
			t.Fatal(err)
		}
		return lim, ok
	}
	a.p.Check(t.Context(), request("192.0.2.1:1"))
	a.p.Close() // waits for what runs in the background
	if _, ok := published(); ok {
		t.Fatal("a protector that only checked published its limits")
	}
	a = instance(protect.Config{MaxRequests: 250})
	a.p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1"))
	a.p.Close()
	if lim, ok := published(); !ok || lim.MaxRequests != 250 || lim.BanLimit != 1250 {
		t.Fatalf("published %+v %v; want MaxRequests 250, BanLimit 1250", lim, ok)
	}
	for _, tt := range []struct {
		max      int64
		warnings int
	}{{250, 0}, {100, 1}} {
		b := instance(protect.Config{MaxRequests: tt.max, Logger: slog.New(logs)})
		b.p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1"))
		b.p.Close()
		if n := logs.Count(warning); n != tt.warnings {
			t.Fatalf("MaxRequests %d after 250: %d warnings; want %d", tt.max, n, tt.warnings)
		}
	}
	dry, err := protect.New(protect.Config{Store: a.store, Namespace: "dry:", MaxRequests: 7, DryRun: true, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	dry.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1"))
	dry.Close()
	if _, ok, _ := a.store.Published(t.Context(), "dry:"); ok {
		t.Fatal("a dry run published limits")
	}
	// One store value, one namespace, two sets of limits: an error.
	// (a.store counts "svc:" with MaxRequests 250.)
	_, err = protect.New(protect.Config{Store: a.store, Namespace: "svc:", MaxRequests: 100, Logger: discardLogger()})
	if !errors.Is(err, store.ErrLimitsDiffer) || !errors.Is(err, protect.ErrConfig) {
		t.Fatalf("a second set of limits on one store: %v", err)
	}
}
