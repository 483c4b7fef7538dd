package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/redistest"
)

// recoveryBound is how soon after a replica's promotion decisions must
// come from Redis again: a deadline, not a speed. With WaitReplicas, it
// runs from the moment the restarted master is a replica in sync: until
// then the promoted master has no replica to acknowledge a count.
const recoveryBound = 5 * time.Second

// maxLostOnFailover bounds the acknowledged counts a master's SIGKILL
// may lose without WaitReplicas: those it had not yet replicated.
const maxLostOnFailover = 100

// A Cluster master dies under load, with WaitReplicas 1: its replica is
// promoted; nothing is acknowledged from the kill until the dead master,
// restarted, is the new master's replica; within recoveryBound of that
// every decision comes from Redis again (FailClosed: no 503 asked for
// later), with every ban written before the kill in force and not one
// acknowledged count lost.
func TestClusterFailover(t *testing.T) {
	f := clusterFailover(t)
	f.rejoin = f.master.Restart // its nodes.conf makes it the promoted master's replica
	f.waitReplicas = 1
	f.run(t)
}

// The same without WaitReplicas: the promoted replica takes the requests
// within recoveryBound of its promotion, and what the kill loses is
// bounded by the replication window.
func TestClusterFailoverDefault(t *testing.T) {
	f := clusterFailover(t)
	f.run(t)
}

// clusterFailover starts a Cluster of three masters with a replica each,
// and the failover of the master of the load's key.
func clusterFailover(t *testing.T) *failover {
	cl := redistest.StartCluster(t, 3, 1, 2*time.Second)
	const client = "198.51.100.7"
	master := cl.MasterOf(t, "{"+client+"}")
	replica := cl.ReplicaOf(t, master)
	t.Logf("the key's slot is on %s, its replica %s", master, replica.Addr)
	return &failover{url: "redis+cluster://" + strings.Join(cl.Addrs(), ","), client: client,
		master: cl.Node(master), promoted: replica.Addr}
}

// The same with Sentinel: one master, one replica, three sentinels; the
// dead master, restarted, is made the new master's replica at once,
// rather than waiting for the sentinels to make it one.
func TestSentinelFailover(t *testing.T) {
	// Three seconds before a sentinel calls a master down, not one: while
	// the restarted master's full sync forks the promoted one, on a machine
	// that runs every package's tests at once, the promoted master has
	// gone a second without an answer, and the sentinels failed back to
	// the restarted one, a second failover that this test does not make.
	s := redistest.StartSentinels(t, 3*time.Second)
	f := &failover{url: "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + redistest.MasterName, client: "198.51.100.7",
		master: s.Master, promoted: s.Replica.Addr, waitReplicas: 1}
	f.rejoin = func() {
		s.Master.Restart()
		s.Master.Do("replicaof", "127.0.0.1", s.Replica.Port)
	}
	f.run(t)
}

// A failover is one test's topology and what it does to it.
type failover struct {
	url, client string
	master      *redistest.Server // of client's key: SIGKILLed
	promoted    string            // the address of the replica that takes over
	// rejoin, with waitReplicas, restarts the killed master as the
	// promoted one's replica, after the promotion.
	rejoin       func()
	waitReplicas int
}

// answer is one decision of the load.
type answer struct {
	asked     time.Duration // since the load began, when Verify was called
	done      time.Duration // and when it returned
	fromRedis bool          // Redis counted it and answered
	skipped   bool          // the open circuit answered without calling Redis
	count     int64
}

// run runs three protectors, each on a store of its own dialed from
// f.url, under load on f.client, kills the master, waits for the replica
// to become master (and with waitReplicas, rejoins the killed one as its
// replica), and checks what the protectors answered.
func (f *failover) run(t *testing.T) {
	const ns = "failover:"
	url, client, promoted := f.url, f.client, f.promoted
	// A generous WAIT, as StoreTimeout below: a loaded machine's slow
	// replica is not the failover under test.
	opt := Options{Logger: discardLogger(), WaitReplicas: f.waitReplicas, WaitTimeout: 500 * time.Millisecond}
	var ps []*protect.Protector
	for range 3 {
		s, err := Dial(url, opt)
		if err != nil {
			t.Fatal(err)
		}
		p, err := protect.New(protect.Config{Store: s, Namespace: ns, BanNamespace: ns, MaxRequests: 1 << 40, BanLimit: -1, TTL: time.Hour,
			// A deadline generous enough that a loaded machine's slowness
			// is not taken for the failover under test.
			OnStoreError: protect.FailClosed, StoreTimeout: time.Second, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close(); s.Close() })
		ps = append(ps, p)
	}
	ctx := t.Context()
	// Bans on addresses across every slot's master.
	var banned []string
	for i := range 30 {
		a := fmt.Sprintf("203.0.113.%d", i+1)
		if _, err := ps[i%3].Ban(ctx, a, protect.BanOptions{For: time.Hour, Reason: "before the kill"}); err != nil {
			t.Fatalf("Ban(%s) = %v", a, err)
		}
		banned = append(banned, a)
	}

	start := time.Now()
	stop := make(chan struct{})
	var (
		mu      sync.Mutex
		answers []answer
		wg      sync.WaitGroup
	)
	addr := netip.MustParseAddr(client)
	for _, p := range ps {
		for range 2 {
			wg.Go(func() {
				var mine []answer
				for {
					select {
					case <-stop:
						mu.Lock()
						answers = append(answers, mine...)
						mu.Unlock()
						return
					default:
					}
					asked := time.Since(start)
					d, err := p.VerifyAddr(context.Background(), addr)
					if err != nil {
						t.Errorf("VerifyAddr = %v", err)
					}
					a := answer{asked: asked, done: time.Since(start), fromRedis: d.Err == nil && d.Status == protect.Allowed, skipped: errors.Is(d.Err, protect.ErrStoreUnavailable)}
					if a.fromRedis {
						a.count = d.Count
					} else if d.Status != protect.Unavailable {
						t.Errorf("decision with store error %v = %v, want unavailable (FailClosed)", d.Err, d.Status)
					}
					mine = append(mine, a)
					if !a.fromRedis {
						time.Sleep(time.Millisecond) // a refused client waits a little before it asks again
					}
				}
			})
		}
	}
	time.Sleep(time.Second) // load before the kill
	killed := time.Since(start)
	f.master.Kill()
	// dead is when the master has exited (Kill waits for it): a request
	// asked between killed and dead may still have reached it, and been
	// acknowledged by its replica.
	dead := time.Since(start)
	var promotedAt time.Duration
	redistest.Eventually(t, 30*time.Second, promoted+" promoted to master", func() error {
		if !redistest.IsMaster(promoted) {
			return errors.New("still a replica")
		}
		promotedAt = time.Since(start)
		return nil
	})
	// recovered is when Redis can decide again: the promotion, or with
	// WaitReplicas, the killed master's return as the new one's replica.
	recovered, rejoining := promotedAt, time.Duration(-1)
	if f.waitReplicas > 0 {
		rejoining = time.Since(start)
		f.rejoin()
		redistest.Eventually(t, 30*time.Second, f.master.Addr+" a replica in sync", func() error {
			if redistest.IsMaster(f.master.Addr) {
				return errors.New("a master")
			}
			if err := f.master.InSync(); err != nil {
				return err
			}
			recovered = time.Since(start)
			return nil
		})
	}
	time.Sleep(recoveryBound + time.Second) // load after the bound
	close(stop)
	wg.Wait()

	var (
		acked, skipped, afterBound, lost, ackedDown int
		last503, firstRedis                         time.Duration = -1, -1
		firstDown                                                 = time.Duration(1<<63 - 1)
		seen                                                      = make(map[int64]bool)
	)
	for _, a := range answers {
		if a.skipped {
			skipped++
		}
		if !a.fromRedis {
			last503 = max(last503, a.asked)
			if a.asked > recovered+recoveryBound {
				afterBound++
			}
			continue
		}
		acked++
		if seen[a.count] {
			// The new master never saw a count the old one
			// acknowledged: Redis replicates asynchronously, so a
			// SIGKILL loses what the replica had not yet received.
			lost++
		}
		seen[a.count] = true
		if a.asked > dead && a.done < rejoining {
			// Acknowledged while the only replica was a master.
			ackedDown++
			firstDown = min(firstDown, a.asked)
		}
		if a.asked > recovered && (firstRedis < 0 || a.asked < firstRedis) {
			firstRedis = a.asked
		}
	}
	t.Logf("%d decisions: %d from Redis, %d refused by the open circuit; killed at %v, promoted %v later, able to acknowledge %v after the promotion; Redis answered again %v after that, last 503 asked %v after it",
		len(answers), acked, skipped, killed.Round(time.Millisecond), (promotedAt - killed).Round(time.Millisecond), (recovered - promotedAt).Round(time.Millisecond),
		(firstRedis - recovered).Round(time.Millisecond), (last503 - recovered).Round(time.Millisecond))
	if afterBound != 0 || last503 < killed {
		t.Errorf("503s asked over %v after Redis could decide again = %d, last asked %v after the kill; want none after, and 503s while the master was dead", recoveryBound, afterBound, last503-killed)
	}
	if firstRedis < 0 {
		t.Fatalf("no decision from Redis after the promotion")
	}
	if ackedDown != 0 {
		t.Errorf("counts acknowledged between the kill and the old master's return as a replica = %d (the first asked %v after the master exited, %v after the kill), want 0 (no replica to have them)", ackedDown, firstDown-dead, dead-killed)
	}
	t.Logf("acknowledged counts the promoted replica never saw: %d", lost)
	switch {
	case f.waitReplicas > 0 && lost != 0:
		t.Errorf("acknowledged counts lost in the failover with WaitReplicas %d = %d, want 0", f.waitReplicas, lost)
	case lost > maxLostOnFailover:
		// The replication window is what a SIGKILL can lose
		// (docs/redis.md, "Failover"): a few counts of the last
		// milliseconds, never more than the master acknowledged in a
		// moment.
		t.Errorf("acknowledged counts lost in the failover = %d, want at most %d (the replication window)", lost, maxLostOnFailover)
	}
	st, err := admin.New(ps[0]).InspectKey(ctx, protect.Key{Prefix: netip.PrefixFrom(addr, 32)})
	if err != nil {
		t.Fatal(err)
	}
	// Every acknowledged count is in the counter; no request was counted
	// twice: the counter holds at most the requests that reached Redis.
	if st.Count < int64(acked-lost) || st.Count > int64(len(answers)-skipped) {
		t.Errorf("counter = %d, want from %d (acknowledged, less those lost in the failover) to %d (requests that reached Redis)", st.Count, acked-lost, len(answers)-skipped)
	}
	// Listing reads an index in every slot: under the deadline of a
	// tool, not of a request.
	lister, err := Dial(url, Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer lister.Close()
	lp, err := protect.New(protect.Config{Store: lister, Namespace: ns, BanNamespace: ns, MaxRequests: 1 << 40, BanLimit: -1, TTL: time.Hour,
		StoreTimeout: 5 * time.Second, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer lp.Close()
	bans, err := admin.New(lp).Bans(ctx, admin.Filter{})
	if err != nil || len(bans) != len(banned) {
		t.Errorf("Bans after the failover = %d bans, %v; want %d", len(bans), err, len(banned))
	}
	for _, a := range banned {
		d, err := ps[2].VerifyAddr(ctx, netip.MustParseAddr(a))
		if err != nil || d.Err != nil || d.Status != protect.Banned {
			t.Errorf("VerifyAddr(%s) after the failover = %v, %v, %v; want banned", a, d.Status, err, d.Err)
		}
	}
}
