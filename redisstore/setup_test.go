package redisstore

import (
	"slices"
	"strings"
	"testing"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/redistest"
)

// CheckSetup warns of an eviction policy that can evict bans and of a
// server without persistence, each saying what is lost and how to fix
// it, and of nothing on a server set up as docs/redis.md advises; on a
// server that refuses CONFIG it says it could not check.
func TestRedisCheckSetup(t *testing.T) {
	srv := redistest.Start(t) // no persistence, noeviction
	in := newInstance(t, srv.Addr, "svc:", protect.Config{}, Options{RangeRefresh: -1})
	check := func(want ...string) {
		t.Helper()
		ws, err := in.store.CheckSetup(t.Context())
		if err != nil || len(ws) != len(want) {
			t.Fatalf("CheckSetup = %v, %v; want %d warnings", ws, err, len(want))
		}
		for i, w := range ws {
			if !strings.Contains(w.String(), want[i]) || !strings.Contains(w.Fix, "noeviction") || w.Server != srv.Addr {
				t.Fatalf("CheckSetup warning %d = %q (server %q); want it saying %q, server %s, and noeviction as the fix", i, w, w.Server, want[i], srv.Addr)
			}
		}
	}
	check("persistence appendonly no")
	for _, tc := range []struct{ policy, want string }{
		{"allkeys-lru", "maxmemory-policy allkeys-lru on " + srv.Addr + ": when Redis reaches maxmemory it evicts any key: bans, permanent ones too"},
		{"volatile-ttl", "maxmemory-policy volatile-ttl on " + srv.Addr + ": when Redis reaches maxmemory it evicts keys with a TTL: every temporary ban"},
	} {
		srv.Do("CONFIG", "SET", "maxmemory-policy", tc.policy)
		check(tc.want, "persistence")
	}
	srv.Do("CONFIG", "SET", "maxmemory-policy", "noeviction")
	srv.Do("CONFIG", "SET", "appendonly", "yes")
	check()
}

// A server that refuses CONFIG (renamed away, as managed servers do) is
// not checked: the error says so and names the server.
func TestRedisCheckSetupRefused(t *testing.T) {
	srv := redistest.Start(t, "--rename-command", "CONFIG", "")
	in := newInstance(t, srv.Addr, "svc:", protect.Config{}, Options{RangeRefresh: -1})
	ws, err := in.store.CheckSetup(t.Context())
	if err == nil || len(ws) != 0 || !strings.Contains(err.Error(), "cannot check") || !strings.Contains(err.Error(), srv.Addr) {
		t.Fatalf("CheckSetup = %v, %v; want no warnings and an error saying it cannot check %s", ws, err, srv.Addr)
	}
}

// On a Redis Cluster every master is checked, and each warning names its
// node (CI's cluster keeps nothing across a restart: a warning each).
func TestRedisCheckSetupCluster(t *testing.T) {
	addrs := redistest.ClusterAddrs(t)
	s := New(redistest.Dial("cluster:"+strings.Join(addrs, ",")), Options{RangeRefresh: -1, Logger: discardLogger()})
	t.Cleanup(func() { s.Close(); s.client.Close() })
	ws, err := s.CheckSetup(t.Context())
	if err != nil || len(ws) == 0 {
		t.Fatalf("CheckSetup = %v, %v; want a warning for each master", ws, err)
	}
	servers := map[string]bool{}
	for _, w := range ws {
		if !slices.Contains(addrs, w.Server) || servers[w.Server] {
			t.Fatalf("CheckSetup = %v; want one warning naming each master, one of %v", ws, addrs)
		}
		servers[w.Server] = true
	}
}

// setupWarnings on what CONFIG GET answers: a setting the server does not
// show is a warning that says it could not be checked, never a pass.
func TestSetupWarningsHidden(t *testing.T) {
	for _, tc := range []struct {
		name string
		conf map[string]string
		want []string // Setting Value of each warning, in order
	}{
		{"as advised", map[string]string{"maxmemory-policy": "noeviction", "appendonly": "yes", "save": ""}, nil},
		{"snapshots only", map[string]string{"maxmemory-policy": "noeviction", "appendonly": "no", "save": "3600 1"}, nil},
		{"policy hidden", map[string]string{"appendonly": "yes"}, []string{"maxmemory-policy not shown"}},
		{"persistence hidden", map[string]string{"maxmemory-policy": "noeviction"}, []string{"persistence not shown"}},
		{"everything hidden", map[string]string{}, []string{"maxmemory-policy not shown", "persistence not shown"}},
		{"save hidden, AOF off", map[string]string{"maxmemory-policy": "noeviction", "appendonly": "no"}, []string{"persistence appendonly no, save not shown"}},
		{"appendonly hidden, no snapshots", map[string]string{"maxmemory-policy": "noeviction", "save": ""}, []string{"persistence appendonly not shown, save \"\""}},
		{"appendonly hidden, snapshots", map[string]string{"maxmemory-policy": "noeviction", "save": "3600 1"}, nil},
		{"lru, no persistence", map[string]string{"maxmemory-policy": "allkeys-lru", "appendonly": "no", "save": ""}, []string{"maxmemory-policy allkeys-lru", "persistence appendonly no, save \"\""}},
	} {
		var got []string
		for _, w := range setupWarnings(tc.conf, "") {
			got = append(got, w.Setting+" "+w.Value)
			if w.Risk == "" || w.Fix == "" {
				t.Errorf("setupWarnings(%s) gave %q without its risk and fix", tc.name, w.Setting)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("setupWarnings(%s) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
