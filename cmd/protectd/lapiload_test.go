package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/redisstore"
)

// lapiLoadBytes is the bound docs/firewall.md states for the growth of
// protectd's peak resident memory while 64 bouncers pull a startup
// answer of 100k bans on Redis, and 40 more never read theirs.
const lapiLoadBytes = 256 << 20

// fillRedis bans n addresses from 10.0.0.0 for an hour in namespace ns
// of the Redis at addr, bans too (the default ban namespace is shared
// by every test on that Redis), from 32 goroutines at once.
func fillRedis(t *testing.T, addr, ns string, n int) {
	t.Helper()
	rc := redistest.Dial(addr)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := redisstore.New(rc, redisstore.Options{Logger: log, RangeRefresh: -1})
	p, err := protect.New(protect.Config{Store: s, Namespace: ns, BanNamespace: ns, StoreTimeout: 10 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Close(); s.Close(); rc.Close() }()
	const workers = 32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
				if _, err := p.Ban(context.Background(), a.String(), protect.BanOptions{For: time.Hour, Reason: "load"}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// startupPull asks for a startup answer with key and returns its status
// and how many decisions it holds.
func startupPull(addr, key string) (int, int, error) {
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/decisions/stream?startup=true", nil)
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var n idCounter
	_, err = io.CopyBuffer(&n, resp.Body, make([]byte, 64<<10))
	return resp.StatusCode, n.n, err
}

// idCounter counts the decisions written to it, "id": across writes, so
// that a test reads an answer at the pace protectd writes it.
type idCounter struct {
	n    int
	tail []byte
}

func (c *idCounter) Write(p []byte) (int, error) {
	const id = `"id":`
	b := append(c.tail, p...)
	c.n += bytes.Count(b, []byte(id))
	c.tail = append(c.tail[:0], b[max(0, len(b)-len(id)+1):]...)
	return len(p), nil
}

// TestLAPIManyBouncers: on Redis with 100k bans, 64 bouncers asking
// startup=true at once each get 200 and every decision, then a bouncer
// asking while 40 others never read theirs gets the same; protectd's
// peak resident memory grows within lapiLoadBytes throughout.
func TestLAPIManyBouncers(t *testing.T) {
	const bans, bouncers, stalled = 100_000, 64, 40
	// A server of its own: 100k bans on the shared one would slow every
	// other test's scans of it.
	addr := redistest.Start(t).Addr
	ns := redistest.NamespaceAt(t, addr)
	fillRedis(t, addr, ns, bans)
	keys := make([]string, bouncers+1)
	for i := range keys {
		keys[i] = fmt.Sprintf("bouncer-%02d-0123456789abcdef", i)
	}
	// Each page of the listing has StoreTimeout; on two shared cores
	// under -race a page of the default's length can time out, and this
	// test measures bytes, not the machine's speed.
	ch := startChild(t, []string{"crowdsec local api"},
		"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_STORE_TIMEOUT=5s", "HTTP_PROTECT_REDIS_URL=redis://"+addr+"/0", "HTTP_PROTECT_NAMESPACE="+ns, "HTTP_PROTECT_BAN_NAMESPACE="+ns,
		envLAPIListen+"=127.0.0.1:0", envLAPIKeys+"="+strings.Join(keys, ","))
	lapiAddr := ch.addrs["crowdsec local api"]
	before := ch.peakRSS(t)

	type result struct{ status, decisions int }
	results := make([]result, bouncers)
	var wg sync.WaitGroup
	for i := range bouncers {
		wg.Go(func() {
			st, n, err := startupPull(lapiAddr, keys[i])
			if err != nil {
				t.Errorf("bouncer %d: %v", i, err)
			}
			results[i] = result{st, n}
		})
	}
	wg.Wait()
	for i, r := range results {
		if r != (result{200, bans}) {
			t.Errorf("bouncer %d of %d asking startup=true at once = %d with %d decisions, want 200 with %d", i, bouncers, r.status, r.decisions, bans)
		}
	}
	afterMany := ch.peakRSS(t) - before
	t.Logf("%d bouncers asking startup=true over %d bans on Redis: peak RSS +%d bytes", bouncers, bans, afterMany)

	for range stalled {
		c := tinyReader(t, lapiAddr)
		fmt.Fprintf(c, "GET /v1/decisions/stream?startup=true HTTP/1.1\r\nHost: protectd\r\nX-Api-Key: %s\r\n\r\n", keys[0])
	}
	st, n, err := startupPull(lapiAddr, keys[bouncers])
	if err != nil || st != 200 || n != bans {
		t.Errorf("a bouncer asking while %d never read = %d with %d decisions (%v), want 200 with %d", stalled, st, n, err, bans)
	}
	grew := ch.peakRSS(t) - before
	if t.Failed() {
		t.Logf("protectd's log:\n%.4000s", ch.log)
	}
	t.Logf("and %d bouncers that never read, one that reads: peak RSS +%d bytes", stalled, grew)
	if grew > lapiLoadBytes {
		t.Errorf("peak RSS of protectd grew %d bytes under %d startup pulls of %d bans and %d that never read, want at most %d",
			grew, bouncers, bans, stalled, lapiLoadBytes)
	}
}
