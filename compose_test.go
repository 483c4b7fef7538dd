package protect

import (
	"fmt"
	"log/slog"
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

// A dry-run protector never writes a ban that a live protector on the same
// store enforces: it decides "would ban" (logged once), sets the headers,
// refuses nothing, and the live protector keeps serving the client.
func TestDryRunWritesNoBan(t *testing.T) {
	for _, st := range storesUnderTest {
		t.Run(st.name, func(t *testing.T) {
			s := st.make(t)
			logs := &recorder{}
			dry, _ := newTestProtector(t, Config{Store: s, Namespace: "canary:", MaxRequests: 1, BanLimit: 2, DryRun: true, Logger: slog.New(logs)})
			live, _ := newTestProtector(t, Config{Store: s, Namespace: "live:", MaxRequests: 100})
			a := netip.MustParseAddr("192.0.2.60")
			var got []string
			for range 5 {
				d, _ := dry.VerifyAddr(t.Context(), a)
				got = append(got, fmt.Sprintf("%v/%v/%d", d.Status, d.Refused(), d.StatusCode()))
			}
			if want := "[allowed/false/200 limited/false/200 banned/false/200 banned/false/200 banned/false/200]"; fmt.Sprint(got) != want {
				t.Fatalf("dry run: %v; want %s", got, want)
			}
			if d, _ := live.VerifyAddr(t.Context(), a); d.Status != Allowed {
				t.Fatalf("live protector: %v; want allowed: the dry run must not have banned the client", d.Status)
			}
			for _, p := range []*Protector{dry, live} {
				if bans, err := p.Bans(t.Context(), BanFilter{}); err != nil || len(bans) != 0 {
					t.Fatalf("bans %v %v; want none", bans, err)
				}
			}
			if n := logs.count("protect: dry run: would ban"); n != 1 {
				t.Fatalf("%d \"would ban\" lines; want 1", n)
			}
		})
	}
}

// count returns how many records have message msg.
func (h *recorder) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r["msg"] == msg {
			n++
		}
	}
	return n
}
