package protect

import (
	"net/netip"
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// storesUnderTest makes a fresh shared store of each kind that every
// store test here runs on: memory and miniredis.
var storesUnderTest = []struct {
	name string
	make func(t *testing.T) Store
}{
	{"memory", func(t *testing.T) Store {
		s := NewMemoryStore(MemoryOptions{})
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"miniredis", func(t *testing.T) Store {
		c := dial(miniredis.RunT(t).Addr())
		s := NewRedisStore(c, RedisOptions{RangeRefresh: -1, Logger: discardLogger()})
		t.Cleanup(func() { s.Close(); c.Close() })
		return s
	}},
}

// One ban list: a client banned by the login guard is refused by the API,
// which counts under another namespace, because both read the default
// BanNamespace; a protector with a BanNamespace of its own does not see it.
func TestOneBanListAcrossNamespaces(t *testing.T) {
	for _, st := range storesUnderTest {
		t.Run(st.name, func(t *testing.T) {
			s := st.make(t)
			login, _ := newTestProtector(t, Config{Store: s, Namespace: "login:", MaxRequests: 1, BanLimit: 2})
			api, _ := newTestProtector(t, Config{Store: s, Namespace: "api:", MaxRequests: 100})
			apart, _ := newTestProtector(t, Config{Store: s, Namespace: "canary:", BanNamespace: "canary:", MaxRequests: 100})
			a := netip.MustParseAddr("192.0.2.50")
			for range 3 {
				login.VerifyAddr(t.Context(), a)
			}
			if d, _ := api.VerifyAddr(t.Context(), a); d.Status != Banned {
				t.Fatalf("api: %v; want banned by the login guard's ban", d.Status)
			}
			if d, _ := apart.VerifyAddr(t.Context(), a); d.Status != Allowed {
				t.Fatalf("a protector with its own ban list: %v; want allowed", d.Status)
			}
		})
	}
}
