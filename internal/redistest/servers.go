package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/needs"

	"github.com/redis/go-redis/v9"
)

// A Server is a redis-server process that a test started on loopback,
// for the tests that kill or reconfigure their servers. t.Cleanup stops
// it by its PID.
type Server struct {
	Addr string // 127.0.0.1:port
	Port int
	Dir  string // its working directory, with its log in Dir/log
	t    testing.TB
	argv []string // redis-server's command line
	cmd  *exec.Cmd
	done chan struct{}
}

// Kill sends the server SIGKILL and waits for it to end. A paused server
// is let run first, so that it can die.
func (s *Server) Kill() {
	pid := s.cmd.Process.Pid
	syscall.Kill(-pid, syscall.SIGCONT)
	syscall.Kill(-pid, syscall.SIGKILL)
	<-s.done
}

// Log returns what the server logged.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
	return string(b)
}

// Client returns a one-node client of s, closed in t.Cleanup.
func (s *Server) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// binary finds a program that these tests run, or skips (fails when CI is
// set: CI installs redis-server, which brings redis-cli and sentinel).
func binary(t testing.TB, name string) string {
	t.Helper()
	return needs.Binary(t, name, "Debian's redis-server brings it")
}

// freePort returns a loopback port that is free, and whose port+10000
// (a Cluster node's bus) is too, when bus is set.
func freePort(t testing.TB, bus bool) int {
	t.Helper()
	for range 100 {
		p := 20000 + rand.IntN(35000)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		if bus {
			ln2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
			if err != nil {
				ln.Close()
				continue
			}
			ln2.Close()
		}
		ln.Close()
		return p
	}
	t.Fatal("no free loopback port")
	return 0
}

// StartServer starts redis-server on a free loopback port with args
// added to its command line (a config file first, when args[0] ends in
// .conf), without persistence, and waits until it answers PING.
func StartServer(t testing.TB, bus bool, args ...string) *Server {
	t.Helper()
	bin := binary(t, "redis-server")
	port := freePort(t, bus)
	dir := t.TempDir()
	var argv []string
	if len(args) > 0 && strings.HasSuffix(args[0], ".conf") {
		argv, args = append(argv, args[0]), args[1:]
	}
	argv = append(argv, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "log"), "--repl-diskless-sync-delay", "0")
	argv = append(argv, args...)
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, Dir: dir, t: t, argv: append([]string{bin}, argv...)}
	s.launch()
	t.Cleanup(s.Kill)
	return s
}

// launch starts the server's process and waits until it answers PING.
func (s *Server) launch() {
	s.t.Helper()
	s.cmd = exec.Command(s.argv[0], s.argv[1:]...)
	// A group of its own, so that Kill reaches the children it forks
	// (a background save or AOF rewrite), which would outlive it and
	// write into its directory.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("redis-server %q: %v", s.argv, err)
	}
	done := make(chan struct{})
	s.done = done
	go func() { s.cmd.Wait(); close(done) }()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		select {
		case <-done:
			s.t.Fatalf("redis-server %q exited: %v; log:\n%s", s.argv, err, s.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server %q does not answer: %v; log:\n%s", s.argv, err, s.Log())
		}
	}
}

// A Cluster is a real Redis Cluster of masters with replicas, each node
// a process of its own.
type Cluster struct {
	Nodes []*Server
}

// Addrs returns every node's address.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr)
	}
	return out
}

// Node returns the node at addr, or nil.
func (c *Cluster) Node(addr string) *Server {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// StartCluster starts masters × (1 + replicas) redis-server processes
// with cluster-node-timeout nodeTimeout, makes them one cluster with
// redis-cli --cluster create, and waits until every node says the
// cluster is ok and every replica is in sync with its master.
func StartCluster(t testing.TB, masters, replicas int, nodeTimeout time.Duration) *Cluster {
	t.Helper()
	cli := binary(t, "redis-cli")
	c := &Cluster{}
	for range masters * (1 + replicas) {
		n := StartServer(t, true, "--cluster-enabled", "yes", "--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10))
		c.Nodes = append(c.Nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli %q: %v\n%s", args, err, out)
	}
	Eventually(t, 30*time.Second, "the cluster is ok and every replica in sync", func() error {
		for _, n := range c.Nodes {
			if err := clusterReady(n); err != nil {
				return fmt.Errorf("%s: %w", n.Addr, err)
			}
		}
		return nil
	})
	return c
}

func clusterReady(n *Server) error {
	c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return fmt.Errorf("cluster state not ok")
	}
	return inSync(n)
}

// inSync returns an error while n is a replica that is not in sync with
// its master (a master waits repl-diskless-sync-delay before the first
// sync).
func inSync(n *Server) error {
	c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	repl, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
		return fmt.Errorf("replica %s not in sync", n.Addr)
	}
	return nil
}

// MasterOf returns the address of the master that serves key's slot, as
// the first node that answers says.
func (c *Cluster) MasterOf(t testing.TB, key string) string {
	t.Helper()
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		var slots []redis.ClusterSlot
		if err == nil {
			slots, err = cl.ClusterSlots(ctx).Result()
		}
		cancel()
		cl.Close()
		if err != nil {
			continue
		}
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) {
				return s.Nodes[0].Addr
			}
		}
	}
	t.Fatalf("no node of the cluster names the master of %q", key)
	return ""
}

// ReplicaOf returns a replica of the master at addr.
func (c *Cluster) ReplicaOf(t testing.TB, master string) *Server {
	t.Helper()
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := cl.Info(ctx, "replication").Result()
		cancel()
		cl.Close()
		if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_port:"+master[strings.LastIndexByte(master, ':')+1:]+"\r") {
			return n
		}
	}
	t.Fatalf("no replica of %s", master)
	return nil
}

// A Sentinels is one master, one replica and three sentinels that watch
// them as MasterName.
type Sentinels struct {
	Master, Replica *Server
	Sentinels       []*Server
}

// MasterName is the name the sentinels of StartSentinels know the master by.
const MasterName = "protectmaster"

// SentinelAddrs returns the sentinels' addresses.
func (s *Sentinels) SentinelAddrs() []string {
	var out []string
	for _, n := range s.Sentinels {
		out = append(out, n.Addr)
	}
	return out
}

// StartSentinels starts a master, a replica of it, and three sentinels
// (quorum 2) that take a master for down after downAfter, and waits
// until every sentinel knows the replica and the two other sentinels.
func StartSentinels(t testing.TB, downAfter time.Duration) *Sentinels {
	t.Helper()
	s := &Sentinels{Master: StartServer(t, false)}
	s.Replica = StartServer(t, false, "--replicaof", "127.0.0.1", strconv.Itoa(s.Master.Port))
	for range 3 {
		conf := filepath.Join(t.TempDir(), "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\nsentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s 10000\nsentinel parallel-syncs %s 1\n",
			MasterName, s.Master.Port, MasterName, downAfter.Milliseconds(), MasterName, MasterName)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		s.Sentinels = append(s.Sentinels, StartServer(t, false, conf, "--sentinel"))
	}
	Eventually(t, 30*time.Second, "the replica in sync, and every sentinel knows it and the other sentinels", func() error {
		if err := inSync(s.Replica); err != nil {
			return err
		}
		for _, n := range s.Sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			reps, err := c.Replicas(ctx, MasterName).Result()
			var sens []map[string]string
			if err == nil {
				sens, err = c.Sentinels(ctx, MasterName).Result()
			}
			cancel()
			c.Close()
			switch {
			case err != nil:
				return fmt.Errorf("%s: %w", n.Addr, err)
			case len(reps) != 1 || len(sens) != 2:
				return fmt.Errorf("%s: %d replicas, %d other sentinels", n.Addr, len(reps), len(sens))
			}
		}
		return nil
	})
	return s
}

// Eventually calls f until it returns nil, and fails the test with its
// last error after timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, not yet %s: %v", timeout, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// IsMaster reports whether the server at addr says it is a master.
func IsMaster(addr string) bool {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	info, err := c.Info(ctx, "replication").Result()
	return err == nil && strings.Contains(info, "role:master")
}

// A Topology is a Redis of a test's own behind a multi-host URL, for the
// tests that run a program on each: Topologies lists them.
type Topology struct {
	Name string
	// URL starts the servers for t (stopped in t.Cleanup) and returns
	// their redis+cluster:// or redis+sentinel:// URL.
	URL func(t *testing.T) string
}

// Topologies are a three-master Cluster (node timeout 2s) and a
// Sentinel set (master, replica, three sentinels).
var Topologies = []Topology{
	{"cluster", func(t *testing.T) string {
		return "redis+cluster://" + strings.Join(StartCluster(t, 3, 0, 2*time.Second).Addrs(), ",")
	}},
	{"sentinel", func(t *testing.T) string {
		s := StartSentinels(t, time.Second)
		return "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + MasterName
	}},
}
