package redisstore

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/store"
	"github.com/redis/go-redis/v9"
)

// Dial's one round trip refuses a URL of the wrong topology for its
// server, naming the right scheme; a server that does not answer is no
// error (the failure policy decides until it does).
func TestDialChecksTheTopology(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0, 2*time.Second)
	one := redistest.StartServer(t, false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	node := cl.Nodes[0].Addr
	for _, tc := range []struct {
		url  string
		want string // "" for no error
	}{
		{"redis://:hunter2@" + node + "/0", `protect: redis URL "redis://xxxxx@` + node + `/0": not a Redis URL: the server is a Redis Cluster node (cluster_enabled:1), where a one-node client fails with MOVED or counts per node: use redis+cluster://` + node + `[,host:port…]`},
		{"redis+cluster://" + one.Addr, `protect: redis URL "redis+cluster://` + one.Addr + `": not a Redis URL: the server is not a Redis Cluster node (cluster support disabled): use redis://host:port for one node, or redis+sentinel://…/MASTER for Sentinel`},
		{"redis://" + one.Addr + "/0", ""},
		{"redis+cluster://" + strings.Join(cl.Addrs(), ","), ""},
		{"redis://" + refused + "/0", ""},
		{"redis+cluster://" + refused, ""},
	} {
		s, err := Dial(tc.url, Options{Logger: discardLogger()})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Dial(%q) = %v, want a store", tc.url, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, ErrURL)):
			t.Errorf("Dial(%q) = %v\nwant %q, wrapping ErrURL", tc.url, err, tc.want)
		}
		if s != nil {
			s.Close()
		}
	}
}

// A one-node client made by hand and given to New, on a Cluster node:
// the MOVED answers are logged once, as an error that says what to use.
func TestOneNodeClientOnClusterNodeLogsOnce(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0, 2*time.Second)
	rec := &recorder{}
	c := redis.NewClient(&redis.Options{Addr: cl.Nodes[0].Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	s := New(c, Options{RangeRefresh: -1, Logger: slog.New(rec)})
	t.Cleanup(func() { s.Close() })
	lim := store.Limits{MaxRequests: 10, TTL: time.Minute, BanLimit: -1, BanDuration: time.Hour, BanFactor: 2, MaxBanDuration: time.Hour, OffenseWindow: time.Hour}
	sp, err := s.Space(store.Scope{Namespace: "moved:", Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i := range 50 {
		a := netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})
		if _, err := sp.Take(t.Context(), protect.Key{Prefix: netip.PrefixFrom(a, 32)}, a, 1); err != nil {
			failed++
		}
	}
	const msg = "protect: the redis server is a Redis Cluster node behind a one-node client: every request is decided by the failure policy; use a redis+cluster:// URL or a redis.ClusterClient"
	if failed == 0 || rec.Count(msg) != 1 {
		t.Fatalf("50 takes on one node of a 3-master cluster = %d failed, %d log lines %q; want some failed (MOVED, CROSSSLOT) and one line", failed, rec.Count(msg), msg)
	}
}
