package main

import (
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/redisstore"
	"github.com/redis/go-redis/v9"
)

// publishedNamespaces finds the namespaces protectors published, on one
// node and on every master of a Cluster, and no client key, even one
// whose plan limit is named "limits".
func TestPublishedNamespaces(t *testing.T) {
	clients := map[string]func(t *testing.T) redis.UniversalClient{
		"miniredis": func(t *testing.T) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr(), ContextTimeoutEnabled: true})
		},
		"cluster": func(t *testing.T) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.ClusterAddrs(t), ContextTimeoutEnabled: true})
		},
	}
	for name, mk := range clients {
		t.Run(name, func(t *testing.T) {
			c := mk(t)
			t.Cleanup(func() { c.Close() })
			base := redistest.Namespace(t, c)
			store := redisstore.New(c, redisstore.Options{RangeRefresh: -1})
			t.Cleanup(func() { store.Close() })
			plan, _ := protect.NewPlan("p", protect.Rate{Name: "limits", Limit: 1, Period: 1e9, Burst: 5})
			var want []string
			for _, n := range []string{"addr:", "key:", "login:", "x:", "y:", "z:"} { // across the Cluster's slots
				ns := base + n
				want = append(want, ns)
				p, err := protect.New(protect.Config{Store: store, Namespace: ns, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Publish(t.Context()); err != nil {
					t.Fatal(err)
				}
				p.VerifyConsumer(t.Context(), "limits", plan) // a key <ns>{c:limits}:r:limits
				p.Close()
			}
			got, err := publishedNamespaces(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			got = slices.DeleteFunc(got, func(ns string) bool { return !strings.HasPrefix(ns, base) }) // a shared server's others
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("publishedNamespaces() = %q, want %q", got, want)
			}
		})
	}
}
