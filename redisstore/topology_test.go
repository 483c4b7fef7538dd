package redisstore

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/redistest"
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
