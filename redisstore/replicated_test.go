package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/redistest"
	"github.com/httpprotect/protect/store"
	"github.com/redis/go-redis/v9"
)

// tripHook records each round trip a go-redis client makes, as the
// names of the commands it carried: a pipeline is one trip of several.
// What the client sends of its own (its connections' HELLO and CLIENT
// SETINFO, its reads of a Cluster's slot map) is left out.
type tripHook struct {
	mu    sync.Mutex
	trips [][]string
}

func (h *tripHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.record([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h *tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.record(cmds)
		return next(ctx, cmds)
	}
}

func (h *tripHook) record(cmds []redis.Cmder) {
	var names []string
	for _, c := range cmds {
		if n := c.Name(); n != "cluster" && n != "hello" && n != "client" {
			names = append(names, c.Name())
		}
	}
	if len(names) == 0 {
		return
	}
	h.mu.Lock()
	h.trips = append(h.trips, names)
	h.mu.Unlock()
}

// take returns and forgets the trips recorded, as "evalsha+wait eval+wait".
func (h *tripHook) take() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, t := range h.trips {
		out = append(out, strings.Join(t, "+"))
	}
	h.trips = nil
	return strings.Join(out, " ")
}

// startReplicated starts a master and a replica of it, both the test's
// own.
func startReplicated(t *testing.T) (master, replica *redistest.Server) {
	t.Helper()
	master = redistest.Start(t)
	return master, redistest.StartReplica(t, master)
}

// waitProtector returns a protector on a store with WaitReplicas 1 on
// client, under policy, with its limits published.
func waitProtector(t *testing.T, client redis.UniversalClient, opt Options, policy protect.FailurePolicy) (*protect.Protector, *Store) {
	t.Helper()
	opt.WaitReplicas, opt.RangeRefresh, opt.Logger = 1, -1, discardLogger()
	if opt.WaitTimeout == 0 {
		// Generous: a loaded machine's slow replica is not what these
		// tests are about.
		opt.WaitTimeout = 500 * time.Millisecond
	}
	s := New(client, opt)
	p, err := protect.New(protect.Config{Store: s, Namespace: "wait:", BanNamespace: "wait:", MaxRequests: 1000, BanLimit: -1, TTL: time.Hour,
		OnStoreError: policy, StoreTimeout: time.Second, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); s.Close() })
	if err := p.Publish(t.Context()); err != nil {
		t.Fatal(err)
	}
	return p, s
}

// loadRanges makes s read the range bans of the namespace waitProtector
// gives, which the first request would.
func loadRanges(t *testing.T, s *Store) {
	t.Helper()
	if err := s.ready(t.Context(), s.bans.namespace("wait:")); err != nil {
		t.Fatal(err)
	}
}

// With WaitReplicas, an allowed request is still one round trip: the
// script and its WAIT, pipelined on one connection; the first call of
// each script on a server that lacks it is two (EVALSHA answers NOSCRIPT,
// then EVAL), and nothing is ever sent alone.
func TestWaitReplicasOneRoundTrip(t *testing.T) {
	master, replica := startReplicated(t)
	c := redis.NewClient(&redis.Options{Addr: master.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	caughtUp(t, c, "caught-up")
	hook := &tripHook{}
	c.AddHook(hook)
	p, s := waitProtector(t, c, Options{}, protect.FailClosed)
	a := netip.MustParseAddr("198.51.100.7")
	plan := mustPlan(t, "pro", protect.Quota{Name: "month", Limit: 1000, Period: protect.Monthly})
	loadRanges(t, s)
	hook.take()
	checkRoundTrips(t, hook, p, a, plan)
	// The replica holds every count acknowledged, the moment it is.
	counter, _, _ := redisKeys("wait:", "wait:", protect.Key{Prefix: netip.PrefixFrom(a, 32)})
	if got := replica.Do("get", counter); got != "2" {
		t.Errorf("replica: GET %s = %v, want 2", counter, got)
	}
}

// checkRoundTrips verifies a twice and the consumer "cus_1" on plan
// twice, checking each decision and the round trips it made. The
// server has loaded neither script.
func checkRoundTrips(t *testing.T, hook *tripHook, p *protect.Protector, a netip.Addr, plan *protect.Plan) {
	t.Helper()
	ctx := t.Context()
	for i, want := range []string{"evalsha+wait eval+wait", "evalsha+wait"} {
		d, err := p.VerifyAddr(ctx, a)
		if err != nil || d.Err != nil || d.Status != protect.Allowed || d.Count != int64(i+1) {
			t.Fatalf("VerifyAddr %d = %v count %d, %v, %v; want allowed, count %d", i+1, d.Status, d.Count, err, d.Err, i+1)
		}
		if got := hook.take(); got != want {
			t.Errorf("VerifyAddr %d: round trips %q, want %q", i+1, got, want)
		}
	}
	for i, want := range []string{"evalsha+wait eval+wait", "evalsha+wait"} {
		d, err := p.VerifyConsumer(ctx, "cus_1", plan)
		if err != nil || d.Err != nil || d.Status != protect.Allowed {
			t.Fatalf("VerifyConsumer %d = %v, %v, %v; want allowed", i+1, d.Status, err, d.Err)
		}
		if got := hook.take(); got != want {
			t.Errorf("VerifyConsumer %d: round trips %q, want %q", i+1, got, want)
		}
	}
}

// A replica that does not acknowledge in WaitTimeout makes the count
// unacknowledged: the store's error wraps ErrNotReplicated, and the
// failure policy decides, for the stream and for plans alike. The master
// did count it, and the next acknowledged count is one more.
func TestWaitReplicasTimeout(t *testing.T) {
	master, replica := startReplicated(t)
	caughtUp(t, master.Client(t), "caught-up")
	plan := mustPlan(t, "pro", protect.Quota{Name: "month", Limit: 1000, Period: protect.Monthly})
	cases := []struct {
		name   string
		policy protect.FailurePolicy
		plan   bool
		want   protect.Status
	}{
		{"closed", protect.FailClosed, false, protect.Unavailable},
		{"open", protect.FailOpen, false, protect.Allowed},
		{"local", protect.FailLocal, false, protect.Allowed},
		{"plan closed", protect.FailClosed, true, protect.Unavailable},
	}
	// Each case has a store and a circuit of its own, and a key.
	ps := make([]*protect.Protector, len(cases))
	verify := func(i int) (protect.Decision, error) {
		ctx := t.Context()
		if cases[i].plan {
			return ps[i].VerifyConsumer(ctx, "cus_7", plan)
		}
		return ps[i].VerifyAddr(ctx, netip.MustParseAddr(fmt.Sprintf("198.51.100.%d", i+1)))
	}
	for i, c := range cases {
		client := redis.NewClient(&redis.Options{Addr: master.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { client.Close() })
		ps[i], _ = waitProtector(t, client, Options{WaitTimeout: 20 * time.Millisecond}, c.policy)
		if d, err := verify(i); err != nil || d.Err != nil || d.Status != protect.Allowed {
			t.Fatalf("%s: before the pause = %v, %v, %v; want allowed", c.name, d.Status, err, d.Err)
		}
	}
	replica.Pause()
	for i, c := range cases {
		d, err := verify(i)
		what := "take"
		if c.plan {
			what = "plan"
		}
		wantErr := fmt.Sprintf("protect: redis %s %s: not acknowledged by enough replicas: 0 of 1 within 20ms", what, d.Key)
		if err != nil || d.Status != c.want || !errors.Is(d.Err, ErrNotReplicated) || d.Err.Error() != wantErr {
			t.Errorf("%s: with the replica paused = %v, %v, %v; want %v, %q", c.name, d.Status, err, d.Err, c.want, wantErr)
		}
		// FailLocal counts the request in the local store too, beside
		// the master's unacknowledged count (docs/redis.md says so).
		if c.policy == protect.FailLocal && d.Count != 1 {
			t.Errorf("%s: count with the replica paused = %d, want 1 (the local store's first)", c.name, d.Count)
		}
	}
	replica.Resume()
	caughtUp(t, master.Client(t), "caught-up")
	for i, c := range cases {
		d, err := verify(i)
		if err != nil || d.Err != nil || d.Status != protect.Allowed {
			t.Errorf("%s: after the replica caught up = %v, %v, %v; want allowed", c.name, d.Status, err, d.Err)
		}
		if !c.plan && d.Count != 3 {
			t.Errorf("%s: count after the replica caught up = %d, want 3 (the master kept the unacknowledged count)", c.name, d.Count)
		}
		if c.plan {
			st, err := admin.New(ps[i]).InspectKey(t.Context(), d.Key)
			if err != nil || len(st.Usage) != 1 || st.Usage[0].Used != 3 {
				t.Errorf("%s: Inspect after the replica caught up = %+v, %v; want the quota used 3 times (the master kept the unacknowledged count)", c.name, st.Usage, err)
			}
		}
	}
}

// A ban the script writes, or finds, refuses the request whatever WAIT
// says: the protector sees the new ban (logs it and counts it) and
// decides Banned, not the failure policy's answer. So does a plan's
// script that finds a ban.
func TestWaitReplicasBanNeedsNoReplica(t *testing.T) {
	master, replica := startReplicated(t)
	caughtUp(t, master.Client(t), "caught-up")
	client := redis.NewClient(&redis.Options{Addr: master.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	s := New(client, Options{WaitReplicas: 1, WaitTimeout: 20 * time.Millisecond, RangeRefresh: -1, BanCacheTTL: -1, Logger: discardLogger()})
	rec := &recorder{}
	p, err := protect.New(protect.Config{Store: s, Namespace: "ban:", BanNamespace: "ban:", MaxRequests: 1, BanLimit: 2, TTL: time.Hour,
		OnStoreError: protect.FailClosed, StoreTimeout: time.Second, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); s.Close() })
	// An operator's ban of a consumer, which a plan's script finds.
	plan := mustPlan(t, "pro", protect.Quota{Name: "month", Limit: 1000, Period: protect.Monthly})
	if _, err := p.Ban(t.Context(), "consumer:cus_9", protect.BanOptions{For: time.Hour, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	replica.Pause()
	t.Cleanup(replica.Resume)
	if d, err := p.VerifyConsumer(t.Context(), "cus_9", plan); err != nil || d.Status != protect.Banned || d.Err != nil {
		t.Fatalf("VerifyConsumer(cus_9) with the replica paused = %v, err %v, %v; want banned by the operator's ban, no error", d.Status, d.Err, err)
	}
	addr := netip.MustParseAddr("198.51.100.77")
	for i, want := range []protect.Status{protect.Unavailable, protect.Unavailable, protect.Banned, protect.Banned} {
		d, err := p.VerifyAddr(t.Context(), addr)
		if err != nil || d.Status != want {
			t.Fatalf("VerifyAddr(%s) #%d with the replica paused = %v, err %v, %v; want %v", addr, i+1, d.Status, d.Err, err, want)
		}
		if want == protect.Banned && (d.Err != nil || d.Ban == nil || d.Ban.Source != protect.SourceAuto) {
			t.Fatalf("VerifyAddr(%s) #%d = ban %+v, err %v; want the automatic ban, no error", addr, i+1, d.Ban, d.Err)
		}
	}
	if st := p.Stats(); st.AutoBans != 1 {
		t.Errorf("Stats().AutoBans = %d, want 1: the ban written while WAIT fell short is counted", st.AutoBans)
	}
	if n := rec.Count("protect: ban added"); n != 2 {
		t.Errorf("\"protect: ban added\" logged %d times, want 2 (the operator's, the automatic one)", n)
	}
}

// A shortfall is the failure policy's answer for its request, but no
// failure to the circuit breaker that every key shares: the master
// answered. Ten in a row leave the circuit closed, and each is still
// asked of Redis.
func TestWaitReplicasShortfallKeepsTheCircuitClosed(t *testing.T) {
	master, replica := startReplicated(t)
	caughtUp(t, master.Client(t), "caught-up")
	client := redis.NewClient(&redis.Options{Addr: master.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	p, _ := waitProtector(t, client, Options{WaitTimeout: 20 * time.Millisecond}, protect.FailClosed)
	replica.Pause()
	t.Cleanup(replica.Resume)
	for i := range 10 {
		addr := netip.AddrFrom4([4]byte{198, 51, 100, byte(100 + i)})
		d, err := p.VerifyAddr(t.Context(), addr)
		if err != nil || d.Status != protect.Unavailable || !errors.Is(d.Err, ErrNotReplicated) || !errors.Is(d.Err, store.ErrNotAcknowledged) {
			t.Fatalf("VerifyAddr(%s) with the replica paused = %v, %v, %v; want unavailable, not replicated", addr, d.Status, d.Err, err)
		}
	}
	if st := p.Stats(); st.CircuitOpens != 0 || st.CircuitRejected != 0 || st.StoreErrors != 10 {
		t.Errorf("Stats() = %d circuit opens, %d rejected, %d store errors; want 0, 0, 10", st.CircuitOpens, st.CircuitRejected, st.StoreErrors)
	}
}

// caughtUp waits until the replica of the server of node has its every
// write: a write of key, then WAIT on the same connection. A replica
// fresh from its first sync, or resumed, may take a moment to answer.
func caughtUp(t testing.TB, node *redis.Client, key string) {
	t.Helper()
	redistest.Eventually(t, 10*time.Second, "the replica of "+node.Options().Addr+" caught up", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		wait := redis.NewIntCmd(ctx, "wait", 1, 1000)
		_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, "1", time.Minute)
			p.Process(ctx, wait)
			return nil
		})
		if err != nil {
			return err
		}
		if wait.Val() != 1 {
			return errors.New("WAIT 1: no replica has every write")
		}
		return nil
	})
}

// clusterCaughtUp is caughtUp on every master of cc.
func clusterCaughtUp(t *testing.T, cc *redis.ClusterClient) {
	t.Helper()
	done := make(map[string]bool)
	for i := 0; len(done) < 3 && i < 1000; i++ {
		key := fmt.Sprintf("caught-up{%d}", i)
		m, err := cc.MasterForKey(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if addr := m.Options().Addr; !done[addr] {
			caughtUp(t, m, key)
			done[addr] = true
		}
	}
}

// On a Cluster the script and its WAIT go to the master of the key's
// slot, in one round trip on that node's client (hooks added with
// OnNewNode see it; the ClusterClient's own see nothing). A slot that
// is migrating answers ASK, and one that has moved answers MOVED, which
// the store does not follow: the request is the failure policy's,
// nothing is counted twice, and the slot map is read again, so that the
// next request is counted at the new master.
func TestWaitReplicasCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1, 2*time.Second)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { cc.Close() })
	clusterHook, nodeHook := &tripHook{}, &tripHook{}
	cc.AddHook(clusterHook)
	cc.OnNewNode(func(c *redis.Client) { c.AddHook(nodeHook) })
	p, s := waitProtector(t, cc, Options{}, protect.FailClosed)
	a := netip.MustParseAddr("198.51.100.7")
	plan := mustPlan(t, "pro", protect.Quota{Name: "month", Limit: 1000, Period: protect.Monthly})
	loadRanges(t, s)
	clusterCaughtUp(t, cc)
	nodeHook.take()
	clusterHook.take()
	checkRoundTrips(t, nodeHook, p, a, plan)
	if got := clusterHook.take(); got != "" {
		t.Errorf("ClusterClient round trips %q, want none", got)
	}

	// Move the slot of a key nothing has counted yet to another master,
	// as a resharding does: the store's slot map still names the old one.
	b := netip.MustParseAddr("198.51.100.8")
	base := redisBase("wait:", protect.Key{Prefix: netip.PrefixFrom(b, 32)})
	from := cl.MasterOf(t, base)
	var to string
	for _, n := range cl.Nodes {
		if n.Addr != from && redistest.IsMaster(n.Addr) {
			to = n.Addr
			break
		}
	}
	ctx := t.Context()
	src, dst := cl.Node(from), cl.Node(to)
	slot := src.Do("cluster", "keyslot", base)
	srcID, dstID := src.Do("cluster", "myid"), dst.Do("cluster", "myid")
	// While the slot migrates, a key the source lacks is answered ASK:
	// not followed either.
	dst.Do("cluster", "setslot", slot, "importing", srcID)
	src.Do("cluster", "setslot", slot, "migrating", dstID)
	nodeHook.take()
	d, err := p.VerifyAddr(ctx, b)
	if err != nil || d.Status != protect.Unavailable || d.Err == nil || !strings.Contains(d.Err.Error(), "ASK ") {
		t.Fatalf("VerifyAddr while the slot migrates = %v, %v, %v; want unavailable with ASK", d.Status, err, d.Err)
	}
	if got := nodeHook.take(); got != "evalsha+wait" {
		t.Errorf("round trips of the ASK request %q, want evalsha+wait (not followed)", got)
	}
	// The ASK asked go-redis for a reload of the slot map, which it runs
	// in the background, at most once every 200ms. Let it run now, while
	// the map still names the source: run after the move below, it would
	// send the next request to the new master before any MOVED.
	time.Sleep(time.Second)
	for _, n := range []*redistest.Server{dst, src} {
		n.Do("cluster", "setslot", slot, "node", dstID)
	}
	for _, n := range cl.Nodes {
		if n != src && n != dst && redistest.IsMaster(n.Addr) {
			n.Do("cluster", "setslot", slot, "node", dstID)
		}
	}
	redistest.Eventually(t, 10*time.Second, "the slot's move known to every node", func() error {
		if got := cl.MasterOf(t, base); got != to {
			return fmt.Errorf("master of %s is %s", base, got)
		}
		return nil
	})
	nodeHook.take()
	d, err = p.VerifyAddr(ctx, b)
	if err != nil || d.Status != protect.Unavailable || d.Err == nil || !strings.Contains(d.Err.Error(), "MOVED ") {
		t.Fatalf("VerifyAddr after the slot moved = %v, %v, %v; want unavailable with MOVED", d.Status, err, d.Err)
	}
	if got := nodeHook.take(); got != "evalsha+wait" {
		t.Errorf("round trips of the MOVED request %q, want evalsha+wait (not followed)", got)
	}
	redistest.Eventually(t, 5*time.Second, "the store's slot map reloaded", func() error {
		m, err := cc.MasterForKey(ctx, base)
		if err != nil || m.Options().Addr != to {
			return fmt.Errorf("MasterForKey = %v, %v", m, err)
		}
		return nil
	})
	d, err = p.VerifyAddr(ctx, b)
	if err != nil || d.Err != nil || d.Status != protect.Allowed || d.Count != 1 {
		t.Errorf("VerifyAddr at the new master = %v count %d, %v, %v; want allowed, count 1", d.Status, d.Count, err, d.Err)
	}
}

// A Ring's count and its WAIT go to the key's shard.
func TestWaitReplicasRing(t *testing.T) {
	master, replica := startReplicated(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": master.Addr}, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { ring.Close() })
	p, _ := waitProtector(t, ring, Options{WaitTimeout: 20 * time.Millisecond}, protect.FailClosed)
	caughtUp(t, master.Client(t), "caught-up")
	a := netip.MustParseAddr("198.51.100.7")
	if d, err := p.VerifyAddr(t.Context(), a); err != nil || d.Err != nil || d.Status != protect.Allowed || d.Count != 1 {
		t.Fatalf("VerifyAddr = %v count %d, %v, %v; want allowed, count 1", d.Status, d.Count, err, d.Err)
	}
	replica.Pause()
	defer replica.Resume()
	if d, err := p.VerifyAddr(t.Context(), a); err != nil || d.Status != protect.Unavailable || !errors.Is(d.Err, ErrNotReplicated) {
		t.Errorf("VerifyAddr with the replica paused = %v, %v, %v; want unavailable, ErrNotReplicated", d.Status, err, d.Err)
	}
}

// A client whose connections the store cannot choose is said so at New,
// and every count is the failure policy's: none is acknowledged unwaited.
func TestWaitReplicasUnknownClient(t *testing.T) {
	master := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: master.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	rec := &recorder{}
	s := New(struct{ redis.UniversalClient }{c}, Options{WaitReplicas: 1, RangeRefresh: -1, Logger: slog.New(rec)})
	t.Cleanup(func() { s.Close() })
	if n := rec.Count("protect: every counted request is decided by the failure policy"); n != 1 {
		t.Errorf("New logged the client %d times, want 1", n)
	}
	p, err := protect.New(protect.Config{Store: s, Namespace: "wait:", MaxRequests: 10, OnStoreError: protect.FailClosed, StoreTimeout: time.Second, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	d, err := p.VerifyAddr(t.Context(), netip.MustParseAddr("198.51.100.7"))
	if err != nil || d.Status != protect.Unavailable || d.Err == nil || !strings.Contains(d.Err.Error(), "WaitReplicas needs a *redis.Client") {
		t.Errorf("VerifyAddr = %v, %v, %v; want unavailable, the client named", d.Status, err, d.Err)
	}
}
