package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/redisstore"
)

// feedAnswer is a stream answer reduced to the values it deletes and adds.
type feedAnswer struct{ deleted, added []string }

// pullValues pulls the stream of the Local API at addr with key, on a
// connection of its own (as a bouncer behind a load balancer may), and
// returns the values of the answer, each list in order.
func pullValues(t *testing.T, addr, query, key string) feedAnswer {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/decisions/stream"+query, nil)
	req.Header.Set("X-Api-Key", key)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("GET %s/v1/decisions/stream%s = %d %s, want 200", addr, query, res.StatusCode, body)
	}
	var got struct{ Deleted, New []struct{ Value string } }
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("stream answer %s: %v", body, err)
	}
	var a feedAnswer
	for _, d := range got.Deleted {
		a.deleted = append(a.deleted, d.Value)
	}
	for _, d := range got.New {
		a.added = append(a.added, d.Value)
	}
	return a
}

func (a feedAnswer) is(deleted, added []string) bool {
	return slices.Equal(a.deleted, deleted) && slices.Equal(a.added, added)
}

// startLAPIDaemon runs protectd on the Redis of url with its Local API,
// and returns it and the Local API's address.
func startLAPIDaemon(t *testing.T, url string) (*daemon, string) {
	t.Helper()
	d := startDaemon(t, "HTTP_PROTECT_REDIS_URL="+url, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1",
		"HTTP_PROTECT_STORE_TIMEOUT=5s", envLAPIListen+"=127.0.0.1:0", envLAPIKeys+"="+keyA)
	return d, lapiAddr(t, d)
}

// lapiAddr is the address of d's Local API, as d logged it.
func lapiAddr(t *testing.T, d *daemon) string {
	t.Helper()
	lines := d.log.lines(t, "crowdsec local api")
	if len(lines) == 0 {
		t.Fatalf("protectd logged no crowdsec local api line:\n%s", d.log)
	}
	return lines[0]["addr"].(string)
}

// TestLAPISharedFeed: two protectd on one Redis (a server, a Cluster)
// give one bouncer key one feed, whichever it asks; a lift made while
// one of them is down reaches the bouncer from it once it is back.
func TestLAPISharedFeed(t *testing.T) {
	for _, tc := range []struct {
		name string
		// start starts the servers and returns protectd's URL of them and
		// an address for redistest.Dial.
		start func(t *testing.T) (url, addr string)
	}{
		{"redis-server", func(t *testing.T) (string, string) {
			a := redistest.Start(t).Addr
			return "redis://" + a + "/0", a
		}},
		{"redis-cluster", func(t *testing.T) (string, string) {
			addrs := redistest.StartCluster(t, 3, 0, 2*time.Second).Addrs()
			return "redis+cluster://" + strings.Join(addrs, ","), "cluster:" + strings.Join(addrs, ",")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, addr := tc.start(t)
			rc := redistest.Dial(addr)
			t.Cleanup(func() { rc.Close() })
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			st := redisstore.New(rc, redisstore.Options{Logger: quiet})
			t.Cleanup(func() { st.Close() })
			ops, err := protect.New(protect.Config{Store: st, Logger: quiet, StoreTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ops.Close() })
			ctx := context.Background()
			ban := func(target string) {
				t.Helper()
				if _, err := ops.Ban(ctx, target, protect.BanOptions{For: time.Hour, Reason: "shared"}); err != nil {
					t.Fatal(err)
				}
			}
			lift := func(target string) {
				t.Helper()
				if _, err := ops.Lift(ctx, target, "test"); err != nil {
					t.Fatal(err)
				}
			}

			ban("203.0.113.1")
			a, addrA := startLAPIDaemon(t, url)
			_, addrB := startLAPIDaemon(t, url)
			steps := []struct {
				what           string
				on             func() string
				query          string
				before         func()
				deleted, added []string
			}{
				{"startup on A", func() string { return addrA }, "?startup=true", nil, nil, []string{"203.0.113.1"}},
				{"a ban, asked of B", func() string { return addrB }, "", func() { ban("203.0.113.2") },
					[]string{"203.0.113.2"}, []string{"203.0.113.2"}},
				// A new connection proves no reading: the answer before is
				// sent again with what is new.
				{"A down, a lift, asked of B", func() string { return addrB }, "", func() { a.stop(); lift("203.0.113.1") },
					[]string{"203.0.113.1", "203.0.113.2"}, []string{"203.0.113.2"}},
				{"A back", func() string { _, addrA = startLAPIDaemon(t, url); return addrA }, "", nil,
					[]string{"203.0.113.1"}, nil},
				{"B again", func() string { return addrB }, "", nil, nil, nil},
				{"A again, a ban and a lift", func() string { return addrA }, "", func() { ban("198.51.100.9"); lift("198.51.100.9") },
					[]string{"198.51.100.9"}, nil},
			}
			for _, s := range steps {
				if s.before != nil {
					s.before()
				}
				if got := pullValues(t, s.on(), s.query, keyA); !got.is(s.deleted, s.added) {
					t.Fatalf("%s: pull = deleted %q, new %q; want deleted %q, new %q", s.what, got.deleted, got.added, s.deleted, s.added)
				}
			}
		})
	}
}
