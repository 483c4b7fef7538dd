package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisEnv is the harness's view of the Redis server under test. Only
// loopback addresses are accepted.
type RedisEnv struct {
	Addr  string
	Admin *redis.Client // not instrumented; used for INFO / FLUSHDB

	// RoundTrips counts client->server round trips issued by every client
	// created with NewClient: one per command sent alone, one per pipeline
	// or MULTI/EXEC transaction.
	RoundTrips atomic.Int64

	mu      sync.Mutex
	clients []*redis.Client
}

// PoolSize is large enough for the parallel benchmarks (32 goroutines) and
// the HTTP test (32 connections).
const PoolSize = 64

// NewRedisEnv connects to addr, refusing anything that is not loopback.
func NewRedisEnv(addr string) (*RedisEnv, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if host != "localhost" {
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("refusing non-loopback Redis address %q", addr)
		}
	}
	e := &RedisEnv{Addr: addr}
	e.Admin = redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := e.Admin.Ping(ctx).Err(); err != nil {
		e.Admin.Close()
		return nil, fmt.Errorf("redis at %s: %w", addr, err)
	}
	return e, nil
}

// NewClient returns a pooled go-redis client whose round trips are counted.
// Every Redis peer must get its client here.
func (e *RedisEnv) NewClient() *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:         e.Addr,
		PoolSize:     PoolSize,
		MinIdleConns: 0,
		DialTimeout:  2 * time.Second,
		ReadTimeout:  2 * time.Second,
		WriteTimeout: 2 * time.Second,
		MaxRetries:   -1, // a retry would hide a round trip
	})
	c.AddHook(rtHook{n: &e.RoundTrips})
	e.mu.Lock()
	e.clients = append(e.clients, c)
	e.mu.Unlock()
	return c
}

// CloseClients closes every client handed out by NewClient.
func (e *RedisEnv) CloseClients() {
	e.mu.Lock()
	cs := e.clients
	e.clients = nil
	e.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
}

// Close closes everything.
func (e *RedisEnv) Close() {
	e.CloseClients()
	_ = e.Admin.Close()
}

// Flush empties the benchmark database (the harness owns this Redis).
func (e *RedisEnv) Flush(ctx context.Context) error {
	return e.Admin.FlushDB(ctx).Err()
}

// CommandStats returns calls per command from INFO commandstats. Commands run
// inside Lua scripts are counted too (Redis 7 does that).
func (e *RedisEnv) CommandStats(ctx context.Context) (map[string]int64, error) {
	s, err := e.Admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				out[name] = n
			}
		}
	}
	return out, sc.Err()
}

// Housekeeping reports commands that are not part of an Allow: connection
// set-up by go-redis, the harness's own INFO/FLUSHDB/ECHO markers.
func Housekeeping(cmd string) bool {
	switch {
	case cmd == "info", cmd == "hello", cmd == "auth", cmd == "select",
		cmd == "flushdb", cmd == "flushall", cmd == "echo", cmd == "monitor",
		cmd == "script|load", cmd == "command", strings.HasPrefix(cmd, "command|"),
		strings.HasPrefix(cmd, "client|"), strings.HasPrefix(cmd, "config|"):
		return true
	}
	return false
}

// StatsDelta returns after-before for non-housekeeping commands.
func StatsDelta(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if Housekeeping(k) {
			continue
		}
		if x := v - before[k]; x > 0 {
			d[k] = x
		}
	}
	return d
}

// Sum adds up a delta.
func Sum(d map[string]int64) int64 {
	var n int64
	for _, v := range d {
		n += v
	}
	return n
}

type rtHook struct{ n *atomic.Int64 }

func (h rtHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h rtHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !Housekeeping(cmdName(cmd)) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h rtHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if n := cmdName(c); !Housekeeping(n) && n != "multi" && n != "exec" {
				h.n.Add(1) // one round trip for the whole pipeline
				break
			}
		}
		return next(ctx, cmds)
	}
}

// cmdName maps a command to the commandstats spelling ("client|setinfo").
func cmdName(c redis.Cmder) string {
	name := c.Name()
	args := c.Args()
	if (name == "client" || name == "command" || name == "config" || name == "script") && len(args) > 1 {
		if sub, ok := args[1].(string); ok {
			return name + "|" + strings.ToLower(sub)
		}
	}
	return name
}
