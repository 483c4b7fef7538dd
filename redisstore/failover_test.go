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
	"github.com/httpprotect/protect/internal/redistest"
)

// recoveryBound is how soon after a replica's promotion decisions must
// come from Redis again: a deadline, not a speed.
const recoveryBound = 5 * time.Second

// A Cluster master dies under load: its replica is promoted, and within
// recoveryBound of the promotion every decision comes from Redis again
// (FailClosed: no 503 asked for later), with every ban written before
// the kill in force and no count that Redis acknowledged lost.
// maxLostOnFailover bounds the acknowledged counts a master's SIGKILL
// may lose: those it had not yet replicated.
const maxLostOnFailover = 100

func TestClusterFailover(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1, 2*time.Second)
	const client = "198.51.100.7"
	master := cl.MasterOf(t, "{"+client+"}")
	replica := cl.ReplicaOf(t, master)
	t.Logf("the key's slot is on %s, its replica %s", master, replica.Addr)
	failover(t, "redis+cluster://"+strings.Join(cl.Addrs(), ","), client, cl.Node(master).Kill, replica.Addr)
}

// The same with Sentinel: one master, one replica, three sentinels.
func TestSentinelFailover(t *testing.T) {
	s := redistest.StartSentinels(t, time.Second)
	failover(t, "redis+sentinel://"+strings.Join(s.SentinelAddrs(), ",")+"/"+redistest.MasterName, "198.51.100.7", s.Master.Kill, s.Replica.Addr)
}

// answer is one decision of the load.
type answer struct {
	asked     time.Duration // since the load began, when Verify was called
	fromRedis bool          // Redis counted it and answered
	skipped   bool          // the open circuit answered without calling Redis
	count     int64
}

// failover runs three protectors, each on a store of its own dialed from
// url, under load on client, kills the master with kill, waits for the
// server at promoted to become master, and checks what the protectors
// answered.
func failover(t *testing.T, url, client string, kill func(), promoted string) {
	const ns = "failover:"
	var ps []*protect.Protector
	for range 3 {
		s, err := Dial(url, Options{Logger: discardLogger()})
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
					a := answer{asked: asked, fromRedis: d.Err == nil && d.Status == protect.Allowed, skipped: errors.Is(d.Err, protect.ErrStoreUnavailable)}
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
	kill()
	var promotedAt time.Duration
	redistest.Eventually(t, 30*time.Second, promoted+" promoted to master", func() error {
		if !redistest.IsMaster(promoted) {
			return errors.New("still a replica")
		}
		promotedAt = time.Since(start)
		return nil
	})
	time.Sleep(recoveryBound + time.Second) // load after the bound
	close(stop)
	wg.Wait()

	var (
		acked, skipped, afterBound, lost int
		last503, firstRedis              time.Duration = -1, -1
		seen                                           = make(map[int64]bool)
	)
	for _, a := range answers {
		if a.skipped {
			skipped++
		}
		if !a.fromRedis {
			last503 = max(last503, a.asked)
			if a.asked > promotedAt+recoveryBound {
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
		if a.asked > promotedAt && (firstRedis < 0 || a.asked < firstRedis) {
			firstRedis = a.asked
		}
	}
	t.Logf("%d decisions: %d from Redis, %d refused by the open circuit; killed at %v, promoted %v later, Redis answered again %v after the promotion, last 503 asked %v after it",
		len(answers), acked, skipped, killed.Round(time.Millisecond), (promotedAt - killed).Round(time.Millisecond),
		(firstRedis - promotedAt).Round(time.Millisecond), (last503 - promotedAt).Round(time.Millisecond))
	if afterBound != 0 || last503 < killed {
		t.Errorf("503s asked over %v after the promotion = %d, last asked %v after the kill; want none after, and 503s while the master was dead", recoveryBound, afterBound, last503-killed)
	}
	if firstRedis < 0 {
		t.Fatalf("no decision from Redis after the promotion")
	}
	// The replication window is what a SIGKILL can lose (docs/redis.md,
	// "Failover"): a few counts of the last milliseconds, never more than
	// the master acknowledged in a moment.
	t.Logf("acknowledged counts the promoted replica never saw: %d", lost)
	if lost > maxLostOnFailover {
		t.Errorf("acknowledged counts lost in the failover = %d, want at most %d (the replication window)", lost, maxLostOnFailover)
	}
	st, err := ps[0].Inspect(ctx, protect.Key{Prefix: netip.PrefixFrom(addr, 32)})
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
	bans, err := lp.Bans(ctx, protect.BanFilter{})
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
