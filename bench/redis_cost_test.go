package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRedisCommandCost measures, for every Redis peer, what one Allow costs
// on the server: commands (INFO commandstats delta, in-script commands
// included), the split between commands the client sent and commands run
// inside Lua (from MONITOR, where script commands show as "[0 lua]"), and
// client round trips (go-redis hook). Two phases: "existing" keys (steady
// state) and "new" keys (first event for a key). Writes redis_cost.txt and
// redis_trace.txt (the MONITOR lines of the first 2 calls of each phase).
func TestRedisCommandCost(t *testing.T) {
	env := redisEnvOrSkip(t)
	defer env.Close()
	ctx := context.Background()

	mon, err := startMonitor(env.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.close()

	const calls = 200
	var table, trace strings.Builder
	fmt.Fprintf(&table, "# Redis cost per Allow (%d calls per phase; cmds from INFO commandstats; top-level/in-script split from MONITOR; round trips from a go-redis hook)\n\n", calls)
	fmt.Fprintf(&table, "| peer | phase | cmds/Allow | sent by client | run inside Lua | round trips | commands per Allow |\n|---|---|---:|---:|---:|---:|---|\n")

	for _, p := range RedisPeers() {
		t.Run(p.Name, func(t *testing.T) {
			defer env.CloseClients()
			if err := env.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			l, err := p.New(env, Generous)
			if err != nil {
				t.Fatal(err)
			}
			defer CloseLimiter(l)
			existing := make([]string, calls)
			fresh := make([]string, calls)
			for i := range existing {
				existing[i] = IPKey(i) // address-shaped, as every peer sees in production
				fresh[i] = IPKey(1<<20 + i)
				if _, err := l.Allow(ctx, existing[i]); err != nil { // create keys, load scripts
					t.Fatal(err)
				}
			}
			for _, phase := range []struct {
				name string
				keys []string
			}{{"existing", existing}, {"new", fresh}} {
				marker := "perfmark:" + p.Name + ":" + phase.name
				s0, err := env.CommandStats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := env.Admin.Echo(ctx, marker+":begin").Err(); err != nil {
					t.Fatal(err)
				}
				rt0 := env.RoundTrips.Load()
				for i, k := range phase.keys {
					if i <= 2 { // trace the first two calls; "call2" ends the sample
						if err := env.Admin.Echo(ctx, fmt.Sprintf("%s:call%d", marker, i)).Err(); err != nil {
							t.Fatal(err)
						}
					}
					ok, err := l.Allow(ctx, k)
					if err != nil || !ok {
						t.Fatalf("allowed=%v err=%v", ok, err)
					}
				}
				rt1 := env.RoundTrips.Load()
				if err := env.Admin.Echo(ctx, marker+":end").Err(); err != nil {
					t.Fatal(err)
				}
				s1, err := env.CommandStats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				lines, err := mon.between(marker+":begin", marker+":end", 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				var top, lua int
				var sample []string
				inSample := false
				for _, ln := range lines {
					name := monitorCmd(ln)
					if name == "echo" {
						inSample = strings.Contains(ln, marker+":call") && !strings.Contains(ln, marker+":call2")
						if inSample {
							sample = append(sample, "  -- "+strings.Trim(lastQuoted(ln), `"`))
						}
						continue
					}
					if Housekeeping(name) {
						continue
					}
					if strings.Contains(ln, "[0 lua]") {
						lua++
					} else {
						top++
					}
					if inSample {
						sample = append(sample, "  "+trimMonitor(ln))
					}
				}
				d := StatsDelta(s0, s1)
				n := float64(len(phase.keys))
				fmt.Fprintf(&table, "| %s | %s | %.2f | %.2f | %.2f | %.2f | %s |\n", p.Name, phase.name,
					float64(Sum(d))/n, float64(top)/n, float64(lua)/n, float64(rt1-rt0)/n, breakdown(d, n))
				fmt.Fprintf(&trace, "== %s, %s keys\n%s\n", p.Name, phase.name, strings.Join(sample, "\n"))
			}
		})
	}
	t.Log("\n" + table.String())
	writeResult(t, "redis_cost.txt", table.String())
	writeResult(t, "redis_trace.txt", trace.String())
}

func breakdown(d map[string]int64, n float64) string {
	names := make([]string, 0, len(d))
	for k := range d {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %.2g", strings.ToUpper(k), float64(d[k])/n)
	}
	return strings.Join(parts, ", ")
}

// monitorCmd returns the lower-cased command name of a MONITOR line:
// +1700000000.123456 [0 127.0.0.1:5555] "EVALSHA" "..." ...
func monitorCmd(line string) string {
	i := strings.IndexByte(line, '"')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(line[i+1:], '"')
	if j < 0 {
		return ""
	}
	name := strings.ToLower(line[i+1 : i+1+j])
	if name == "client" || name == "config" || name == "command" || name == "script" {
		rest := line[i+1+j+1:]
		if k := strings.IndexByte(rest, '"'); k >= 0 {
			if m := strings.IndexByte(rest[k+1:], '"'); m >= 0 {
				name += "|" + strings.ToLower(rest[k+1:k+1+m])
			}
		}
	}
	return name
}

func lastQuoted(line string) string {
	if i := strings.LastIndexByte(strings.TrimRight(line, `"`), '"'); i >= 0 {
		return line[i:]
	}
	return line
}

// trimMonitor drops the timestamp and client address, shortens long args
// (script bodies).
func trimMonitor(line string) string {
	src := "client"
	if strings.Contains(line, "[0 lua]") {
		src = "lua   "
	}
	if i := strings.IndexByte(line, ']'); i >= 0 {
		line = strings.TrimSpace(line[i+1:])
	}
	if len(line) > 140 {
		line = line[:140] + "..."
	}
	line = strings.ReplaceAll(line, `\n`, " ")
	return src + " " + line
}

type monitor struct {
	conn  net.Conn
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func startMonitor(addr string) (*monitor, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte("MONITOR\r\n")); err != nil {
		c.Close()
		return nil, err
	}
	r := bufio.NewReader(c)
	first, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "+OK") {
		c.Close()
		return nil, fmt.Errorf("MONITOR: %q %v", first, err)
	}
	m := &monitor{conn: c, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			ln, err := r.ReadString('\n')
			if err != nil {
				return
			}
			m.mu.Lock()
			m.lines = append(m.lines, strings.TrimRight(ln, "\r\n"))
			m.mu.Unlock()
		}
	}()
	return m, nil
}

func (m *monitor) between(begin, end string, wait time.Duration) ([]string, error) {
	deadline := time.Now().Add(wait)
	for {
		m.mu.Lock()
		b, e := -1, -1
		for i, ln := range m.lines {
			if b < 0 && strings.Contains(ln, begin) {
				b = i
			}
			if b >= 0 && strings.Contains(ln, end) {
				e = i
				break
			}
		}
		if b >= 0 && e >= 0 {
			out := append([]string(nil), m.lines[b+1:e]...)
			m.mu.Unlock()
			return out, nil
		}
		m.mu.Unlock()
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("monitor: markers %q..%q not seen", begin, end)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (m *monitor) close() {
	m.conn.Close()
	<-m.done
}
