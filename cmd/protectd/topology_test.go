package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/redistest"
)

// protectd on a Cluster and on Sentinel, dialed from
// HTTP_PROTECT_REDIS_URL: 300 requests of one client give exactly 100
// served, 150 limited and 50 banned.
func TestProtectdOnClusterAndSentinel(t *testing.T) {
	for _, tp := range redistest.Topologies {
		t.Run(tp.Name, func(t *testing.T) {
			d := startDaemon(t, "HTTP_PROTECT_REDIS_URL="+tp.URL(t), "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1",
				"HTTP_PROTECT_MAX_REQUESTS=100", "HTTP_PROTECT_BAN_LIMIT=250", "HTTP_PROTECT_TTL=1h", "HTTP_PROTECT_ON_STORE_ERROR=closed",
				"HTTP_PROTECT_STORE_TIMEOUT=5s") // a loaded machine's slowness is no 503 here
			counts := map[int]int{}
			for range 300 {
				req, _ := http.NewRequest("GET", "http://"+d.addr+verifyPath, nil)
				req.Header.Set("X-Forwarded-For", "203.0.113.7")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				counts[res.StatusCode]++
			}
			if counts[200] != 100 || counts[429] != 150 || counts[403] != 50 {
				t.Fatalf("300 × GET /verify = statuses %v, want 100 × 200, 150 × 429, 50 × 403; log:\n%s", counts, d.log)
			}
		})
	}
}

// protectd -check, and protectd itself, refuse a one-node URL whose
// server is a Cluster node, naming redis+cluster://, and a one-node URL
// that lists several hosts, naming both schemes.
func TestCheckRefusesTheWrongTopology(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0, 2*time.Second)
	node := cl.Nodes[0].Addr
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"redis://" + node + "/0", []string{"HTTP_PROTECT_REDIS_URL", `"redis://` + node + `/0"`, "Redis Cluster node", "use redis+cluster://" + node}},
		{"redis://:hunter2@" + node + "," + cl.Nodes[1].Addr, []string{"HTTP_PROTECT_REDIS_URL", "redis+cluster://", "redis+sentinel://"}},
	} {
		for _, args := range [][]string{{"-check"}, nil} {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), args, []string{"HTTP_PROTECT_REDIS_URL=" + tc.url, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", envListen + "=127.0.0.1:0"}, &stdout, &stderr)
			ok := code == exitUsage && stdout.Len() == 0 && !strings.Contains(stderr.String(), "hunter2")
			for _, w := range tc.want {
				ok = ok && strings.Contains(stderr.String(), w)
			}
			if !ok {
				t.Errorf("protectd %v with HTTP_PROTECT_REDIS_URL=%s = exit %d, stdout %q, stderr %q; want exit 2 saying %q", args, tc.url, code, stdout.String(), stderr.String(), tc.want)
			}
		}
	}
}
