package protect

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// blackHole accepts connections and never answers: a Redis that hangs.
// It reports how many connections it accepted.
func blackHole(t *testing.T) (addr string, conns *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = new(atomic.Int64)
	var open []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range open {
					c.Close()
				}
				return
			}
			conns.Add(1)
			open = append(open, c)
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l.Addr().String(), conns
}

// Protectors on one store share its circuit breaker: four of them on a
// Redis that hangs cost three timeouts in all, then none (not three per
// protector), whether the store was passed in Config.Store or made from
// RedisURL and shared with Sibling.
func TestSharedBreakerAcrossProtectors(t *testing.T) {
	const timeout = 30 * time.Millisecond
	for _, how := range []string{"Config.Store", "RedisURL+Sibling"} {
		t.Run(how, func(t *testing.T) {
			addr, conns := blackHole(t)
			base := Config{StoreTimeout: timeout, OnStoreError: FailOpen, Logger: discardLogger()}
			var ps []*Protector
			for i := range 4 {
				cfg := base
				cfg.Namespace = fmt.Sprintf("p%d:", i)
				var p *Protector
				var err error
				switch {
				case how == "Config.Store":
					if i == 0 {
						s, err := DialRedis("redis://"+addr, RedisOptions{RangeRefresh: -1, Logger: discardLogger()})
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { s.Close() })
						base.Store = s
						cfg.Store = s
					}
					p, err = New(cfg)
				case i == 0:
					cfg.RedisURL = "redis://" + addr
					p, err = New(cfg)
				default:
					p, err = ps[0].Sibling(cfg)
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { p.Close() })
				ps = append(ps, p)
			}
			// New publishes the protector's limits: those calls count too.
			// Each call that reaches the hanging Redis times out, and its
			// connection is dropped: one connection per call.
			for i := range 12 {
				if d, _ := ps[i%4].VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1")); d.Err == nil {
					t.Fatalf("request %d: no error from a Redis that hangs", i)
				}
			}
			if n := conns.Load(); n != breakerThreshold {
				t.Fatalf("4 protectors (New and 12 requests): %d calls reached the hanging Redis; want %d in all", n, breakerThreshold)
			}
		})
	}
}

// Protectors from one RedisURL, made with Sibling, share one pool: four
// protectors making requests one after another hold one connection, where
// four New calls hold four. Counted by the server: miniredis always, and
// CLIENT LIST on a real redis-server when PROTECT_REDIS_ADDR is set.
func TestSiblingsShareOnePool(t *testing.T) {
	type server struct {
		name string
		// url starts or finds the server; ns is a namespace to use on it.
		url func(t *testing.T) (url, ns string, conns func() int)
	}
	servers := []server{
		{"miniredis", func(t *testing.T) (string, string, func() int) {
			m := miniredis.RunT(t)
			return "redis://" + m.Addr(), "protect:", m.CurrentConnectionCount
		}},
		{"redis-server", func(t *testing.T) (string, string, func() int) {
			addr := realRedisAddr(t)
			name := fmt.Sprintf("protect-test-%x", rand.Uint64())
			admin := dial(addr)
			t.Cleanup(func() { admin.Close() })
			ns := uniqueNamespace(t, admin)
			return "redis://" + addr + "/0?client_name=" + name, ns, func() int {
				list, err := admin.ClientList(t.Context()).Result()
				if err != nil {
					t.Fatal(err)
				}
				return strings.Count(list, " name="+name+" ")
			}
		}},
	}
	for _, srv := range servers {
		for _, siblings := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/siblings=%v", srv.name, siblings), func(t *testing.T) {
				url, ns, conns := srv.url(t)
				var ps []*Protector
				for i := range 4 {
					// A generous timeout: this test counts connections, not time.
					cfg := Config{RedisURL: url, Namespace: fmt.Sprintf("%s%d:", ns, i), StoreTimeout: 5 * time.Second, Logger: discardLogger()}
					var p *Protector
					var err error
					if siblings && i > 0 {
						p, err = ps[0].Sibling(cfg)
					} else {
						p, err = New(cfg)
					}
					if err != nil {
						t.Fatal(err)
					}
					ps = append(ps, p)
				}
				t.Cleanup(func() {
					for _, p := range ps {
						p.Close()
					}
				})
				a := netip.MustParseAddr("192.0.2.9")
				for i := range 8 {
					if d, _ := ps[i%4].VerifyAddr(t.Context(), a); d.Err != nil || d.Count != int64(i/4+1) {
						t.Fatalf("request %d: count %d, %v", i, d.Count, d.Err)
					}
					waitPublished(t, ps[i%4]) // one call at a time: one connection is enough
				}
				want := 4
				if siblings {
					want = 1
				}
				if n := conns(); n != want {
					t.Fatalf("%d connections; want %d", n, want)
				}
				// The store outlives the first protector: it closes with the last.
				ps[0].Close()
				if d, _ := ps[3].VerifyAddr(t.Context(), a); d.Err != nil {
					t.Fatalf("after the first protector closed: %v", d.Err)
				}
			})
		}
	}
}

// waitPublished waits for p to have published its limits, which it does
// in the background after its first counted request.
func waitPublished(t *testing.T, p *Protector) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); p.publishing.Load() != publishDone; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the protector never published its limits")
		}
	}
}

// Sibling on a closed protector is ErrClosed, as its doc says, even while
// another protector still holds the store open, and whichever way the
// store was given: a closed protector makes nothing.
func TestSiblingOfClosedProtector(t *testing.T) {
	shared := NewMemoryStore(MemoryOptions{})
	t.Cleanup(func() { shared.Close() })
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"store made by New", Config{}},
		{"Config.Store", Config{Store: shared}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Namespace: "rv3sib:"}
			q, err := p.Sibling(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { q.Close() })
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := p.Sibling(Config{Namespace: "rv3sib2:"})
			if r != nil {
				r.Close()
			}
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("Sibling after Close: err %v; want ErrClosed", err)
			}
		})
	}
}
