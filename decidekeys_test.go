package protect

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpprotect/protect/store"
)

// downStore is a remote memory store whose Take and TakePlan fail while
// down is set.
type downStore struct {
	remoteStore
	down *atomic.Bool
}

type downSpace struct {
	store.Space
	down *atomic.Bool
}

func (s downStore) Space(sc store.Scope) (store.Space, error) {
	sp, err := s.remoteStore.Space(sc)
	if err != nil {
		return nil, err
	}
	return downSpace{sp, s.down}, nil
}

func (sp downSpace) Take(ctx context.Context, k Key, a netip.Addr, n int64) (store.Result, error) {
	if sp.down.Load() {
		return store.Result{}, errDown
	}
	return sp.Space.Take(ctx, k, a, n)
}

func (sp downSpace) TakePlan(ctx context.Context, k Key, a netip.Addr, plan *Plan, cost int64, stream bool) (store.PlanResult, error) {
	if sp.down.Load() {
		return store.PlanResult{}, errDown
	}
	return sp.Space.TakePlan(ctx, k, a, plan, cost, stream)
}

// Every entry point writes the Decision's Addr and Key, on every path of
// decide: the store answering, each failure policy, the FailLocal store,
// a ban held here, the circuit open, a context that ended, Config.Plan.
// With PROTECT_DECISIONS set, the decisions are also written to that
// file, to compare one tree's with another's.
func TestDecisionAddrKeyOnEveryPath(t *testing.T) {
	var log strings.Builder
	plan := mustPlan(t, "p", Rate{Limit: 2, Period: time.Hour})
	v4, v6 := netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("2001:db8::1")
	for _, store := range []string{"up", "down", "ended"} {
		for _, policy := range []FailurePolicy{FailLocal, FailOpen, FailClosed} {
			for _, mode := range []string{"stream", "plan", "keyfunc"} {
				down := new(atomic.Bool)
				clk := newFakeClock()
				s := downStore{remoteStore{NewMemoryStore(MemoryOptions{Clock: clk.Now})}, down}
				cfg := Config{Store: s, Clock: clk.Now, MaxRequests: 2, BanLimit: 3, OnStoreError: policy, Logger: discardLogger()}
				switch mode {
				case "plan":
					cfg.Plan = plan
				case "keyfunc":
					cfg.KeyFunc = func(r *http.Request) (string, bool) { return r.Header.Get("X-Consumer"), true }
				}
				p, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				down.Store(store != "up")
				ctx := t.Context()
				if store == "ended" {
					c, cancel := context.WithCancel(ctx)
					cancel()
					ctx = c
				}
				type call struct {
					name string
					f    func() (Decision, error)
					addr netip.Addr
					key  Key
				}
				get := func(peer, consumer string) *http.Request {
					r := request(peer)
					if consumer != "" {
						r.Header.Set("X-Consumer", consumer)
					}
					return r
				}
				calls := []call{
					{"Verify(192.0.2.7)", func() (Decision, error) { return p.Verify(ctx, get("192.0.2.7:1", "")) }, v4, p.agg.Key(v4)},
					{"Check(192.0.2.7)", func() (Decision, error) { return p.Check(ctx, get("192.0.2.7:1", "")) }, v4, p.agg.Key(v4)},
					{"Verify([2001:db8::1])", func() (Decision, error) { return p.Verify(ctx, get("[2001:db8::1]:1", "")) }, v6, p.agg.Key(v6)},
					{"VerifyAddr(::ffff:192.0.2.7)", func() (Decision, error) { return p.VerifyAddr(ctx, netip.MustParseAddr("::ffff:192.0.2.7")) }, v4, p.agg.Key(v4)},
					{"VerifyAddr(2001:db8::1%eth0)", func() (Decision, error) { return p.VerifyAddr(ctx, netip.MustParseAddr("2001:db8::1%eth0")) }, v6, p.agg.Key(v6)},
					{"VerifyKey(cus_alpha)", func() (Decision, error) { return p.VerifyKey(ctx, "cus_alpha") }, netip.Addr{}, ConsumerKey("cus_alpha")},
				}
				if mode == "keyfunc" {
					// From an address that is never counted, so never banned:
					// a ban on the address would decide under its key.
					other := netip.MustParseAddr("198.51.100.9")
					calls = append(calls, call{"Verify(198.51.100.9, X-Consumer sk_live_0123456789abcdefghij)", func() (Decision, error) {
						return p.Verify(ctx, get("198.51.100.9:1", "sk_live_0123456789abcdefghij"))
					}, other, ConsumerKey("sk_live_0123456789abcdefghij")})
				}
				for i := range 6 { // past MaxRequests and BanLimit; down, past the breaker's threshold
					for _, c := range calls {
						d, err := c.f()
						name := fmt.Sprintf("%s/%v/%s: %s #%d", store, policy, mode, c.name, i+1)
						if d.Addr != c.addr || d.Key != c.key {
							t.Errorf("%s = %v, addr %v, key %v; want addr %v, key %v", name, d.Status, d.Addr, d.Key, c.addr, c.key)
						}
						fmt.Fprintf(&log, "%s = %v addr %v key %v count %d remaining %d limit %d retry %v policy %q dry %v err %v ban %v; %v\n",
							name, d.Status, d.Addr, d.Key, d.Count, d.Remaining, d.Limit, d.RetryAfter, d.Policy, d.DryRun, d.Err, d.Ban != nil, err)
					}
				}
				p.Close()
				s.Close()
			}
		}
	}
	if f := os.Getenv("PROTECT_DECISIONS"); f != "" {
		if err := os.WriteFile(f, []byte(log.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Verify and Check take the one list's early test as VerifyAddr does:
// on every side of it (a /24 the list meets or not, the edges of IPv4,
// a mapped address, IPv6, a safe network inside a listed range, an
// unknown client, a nil set, a set swapped in, several lists) they
// decide as VerifyAddr does.
func TestVerifyEarlyBlockListTest(t *testing.T) {
	entries := make([]BlockEntry, 0, bigSet+8)
	for i := range bigSet {
		entries = append(entries, BlockEntry{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 15), byte(i >> 7), byte(i << 1)}), 32)})
	}
	for _, s := range []string{"0.0.0.0/32", "255.255.255.255/32", "203.0.113.0/24", "2001:db8::/32"} {
		entries = append(entries, BlockEntry{Prefix: netip.MustParsePrefix(s)})
	}
	big := NewBlockSet(entries)
	small := NewBlockSet([]BlockEntry{{Prefix: netip.MustParsePrefix("198.51.100.0/24")}})
	type probe struct {
		peer string // a RemoteAddr
		xff  string // an X-Forwarded-For, when the peer is a trusted proxy
		want Status
	}
	probes := []probe{
		{"100.0.1.6:1", "", Blocked},
		{"100.0.1.7:1", "", Allowed}, // unlisted, in a /24 the list meets
		{"[::ffff:100.0.1.6]:1", "", Blocked},
		{"255.255.255.255:1", "", Blocked},
		{"255.255.255.254:1", "", Allowed},
		{"0.0.0.0:1", "", Unknown},
		{"203.0.113.5:1", "", Blocked},
		{"203.0.113.200:1", "", Safe}, // a safe network inside a listed range
		{"[2001:db8::5]:1", "", Blocked},
		{"[2001:db9::5]:1", "", Allowed},
		{"[fe80::1%eth0]:1", "", Allowed},
		{"192.0.2.1:1", "", Allowed},   // a /24 the list does not meet
		{"192.0.2.200:1", "", Allowed}, // the same, safe when 192.0.2.192/26 is
		{"garbage", "", Unknown},
		{"10.0.0.1:1", "192.0.2.9, nonsense", Unknown},
	}
	for _, tc := range []struct {
		name string
		safe []string
		set  *BlockSet // the handed-over set; nil for none yet
		more bool      // a second list, which leaves no early test
		over map[string]Status
	}{
		{name: "one list", set: big, over: map[string]Status{"203.0.113.200:1": Blocked}},
		{name: "one list, safe networks", set: big, safe: []string{"203.0.113.128/25", "192.0.2.192/26"}, over: map[string]Status{"192.0.2.200:1": Safe}},
		{name: "a nil set", over: map[string]Status{"100.0.1.6:1": Allowed, "[::ffff:100.0.1.6]:1": Allowed, "255.255.255.255:1": Allowed, "203.0.113.5:1": Allowed, "203.0.113.200:1": Allowed, "[2001:db8::5]:1": Allowed}},
		{name: "two lists", set: big, more: true, over: map[string]Status{"203.0.113.200:1": Blocked}},
	} {
		src := &handingSource{}
		src.set.Store(tc.set)
		lists := []BlockList{{Name: "big", Source: src}}
		if tc.more {
			lists = append(lists, BlockList{Name: "small", Source: staticSource{small}})
		}
		p, err := New(Config{Logger: discardLogger(), MaxRequests: 100, TrustedProxies: []string{"10.0.0.0/8"}, SafeNetworks: tc.safe, BlockLists: lists})
		if err != nil {
			t.Fatal(err)
		}
		for _, pr := range probes {
			want := pr.want
			if w, ok := tc.over[pr.peer]; ok {
				want = w
			}
			for _, f := range []struct {
				name string
				f    func(*http.Request) (Decision, error)
			}{{"Verify", func(r *http.Request) (Decision, error) { return p.Verify(t.Context(), r) }}, {"Check", func(r *http.Request) (Decision, error) { return p.Check(t.Context(), r) }}} {
				r := request(pr.peer)
				if pr.xff != "" {
					r.Header.Set("X-Forwarded-For", pr.xff)
				}
				d, err := f.f(r)
				if err != nil || d.Status != want {
					t.Errorf("%s: %s(%s, X-Forwarded-For %q) = %v, %v; want %v", tc.name, f.name, pr.peer, pr.xff, d.Status, err, want)
				}
				if ap, err := netip.ParseAddrPort(pr.peer); err == nil && !strings.HasPrefix(pr.peer, "10.") {
					if v, _ := p.VerifyAddr(t.Context(), ap.Addr()); v.Status != d.Status || v.Addr != d.Addr || v.Key != d.Key {
						t.Errorf("%s: VerifyAddr(%s) = %v addr %v key %v, want %v addr %v key %v as %s", tc.name, ap.Addr(), v.Status, v.Addr, v.Key, d.Status, d.Addr, d.Key, f.name)
					}
				}
			}
		}
		if tc.more {
			if d, _ := p.Verify(t.Context(), request("198.51.100.1:1")); d.Status != Blocked {
				t.Errorf("%s: Verify(198.51.100.1) = %v, want blocked by the second list", tc.name, d.Status)
			}
		}
		p.Close()
	}

	// A set the source stores is in force from the next request, while
	// requests run.
	src := &handingSource{}
	src.set.Store(big)
	p, err := New(Config{Logger: discardLogger(), MaxRequests: 1 << 40, BlockLists: []BlockList{{Name: "big", Source: src}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				p.Verify(context.Background(), request("192.0.2.1:1"))
			}
		}
	}()
	for i := range 50 {
		with := i%2 == 0
		if with {
			src.set.Store(NewBlockSet([]BlockEntry{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}}))
		} else {
			src.set.Store(big)
		}
		want := map[bool]Status{true: Blocked, false: Allowed}[with]
		if d, _ := p.Verify(t.Context(), request("192.0.2.1:1")); d.Status != want {
			t.Fatalf("Verify(192.0.2.1) after set #%d = %v, want %v", i+1, d.Status, want)
		}
	}
	close(stop)
	<-done
}
