package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
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
			// A peer that fails keeps a row, so that the table says it was
			// not measured rather than leaving it out.
			defer func() {
				if t.Failed() {
					fmt.Fprintf(&table, "| %s | failed | | | | | see the test's log |\n", p.Name)
				}
			}()
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
					m, ok := parseMonitor(ln)
					if !ok {
						t.Fatalf("unreadable MONITOR line %q", ln)
					}
					name := m.cmd()
					if name == "echo" {
						mark := ""
						if len(m.args) > 1 {
							mark = m.args[1]
						}
						inSample = mark == marker+":call0" || mark == marker+":call1"
						if inSample {
							sample = append(sample, "  -- "+mark)
						}
						continue
					}
					if Housekeeping(name) {
						continue
					}
					if m.lua {
						lua++
					} else {
						top++
					}
					if inSample {
						sample = append(sample, "  "+m.trimmed())
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

// monitorLine is one command as MONITOR shows it:
//
//	1700000000.123456 [0 127.0.0.1:5555] "EVALSHA" "<sha>" "1" "protect:{10.0.0.1}" "1" "..."
//	1700000000.123500 [0 lua] "INCRBY" "protect:{10.0.0.1}:c" "1"
//	1700000000.123600 [0 [::1]:5555] "ECHO" "perfmark:..."
//
// The line is cut where Redis puts its structure, not where a bracket or a
// quote first appears: keys carry braces (protect's hash tags), arguments
// carry quotes (escaped as \") and the client address of an IPv6
// connection carries brackets of its own.
type monitorLine struct {
	lua  bool     // run by a script, not sent by a client
	args []string // unquoted
	raw  string   // the arguments as Redis quoted them
}

func parseMonitor(line string) (monitorLine, bool) {
	_, rest, ok := strings.Cut(line, " [")
	if !ok {
		return monitorLine{}, false
	}
	i := strings.Index(rest, "] \"")
	if i < 0 {
		return monitorLine{}, false
	}
	_, src, ok := strings.Cut(rest[:i], " ")
	if !ok {
		return monitorLine{}, false
	}
	m := monitorLine{lua: src == "lua", raw: rest[i+2:]}
	args, ok := unquoteMonitor(m.raw)
	if !ok || len(args) == 0 {
		return monitorLine{}, false
	}
	m.args = args
	return m, true
}

// unquoteMonitor splits MONITOR's arguments, each in double quotes with the
// escapes of Redis' sdscatrepr: \\ \" \n \r \t \a \b \xHH.
func unquoteMonitor(s string) ([]string, bool) {
	var out []string
	for {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			return out, true
		}
		if s[0] != '"' {
			return nil, false
		}
		var b strings.Builder
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] != '\\' {
				b.WriteByte(s[i])
				continue
			}
			if i++; i == len(s) {
				return nil, false
			}
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+2 >= len(s) {
					return nil, false
				}
				v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
				if err != nil {
					return nil, false
				}
				b.WriteByte(byte(v))
				i += 2
			default:
				b.WriteByte(s[i])
			}
		}
		if i == len(s) {
			return nil, false
		}
		out = append(out, b.String())
		s = s[i+1:]
	}
}

// cmd returns the command's name in commandstats' spelling ("client|setinfo").
func (m monitorLine) cmd() string {
	name := strings.ToLower(m.args[0])
	switch name {
	case "client", "config", "command", "script":
		if len(m.args) > 1 {
			name += "|" + strings.ToLower(m.args[1])
		}
	}
	return name
}

// trimmed is the line for the trace: where the command came from and its
// arguments, with script bodies cut short.
func (m monitorLine) trimmed() string {
	src := "client"
	if m.lua {
		src = "lua   "
	}
	line := m.raw
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

// MONITOR lines as Redis 7 writes them for protect's keys, whose hash tags
// put braces in every key and whose published limits put escaped quotes in
// an argument.
func TestParseMonitor(t *testing.T) {
	for _, c := range []struct {
		line string
		lua  bool
		cmd  string
		args []string
	}{
		{`1796110586.828893 [0 127.0.0.1:41396] "evalsha" "ed895c29" "1" "protect:{10.0.0.0}" "1" "3600000|-1|stream passed the ban limit of -1 requests"`,
			false, "evalsha", []string{"evalsha", "ed895c29", "1", "protect:{10.0.0.0}", "1", "3600000|-1|stream passed the ban limit of -1 requests"}},
		{`1796110586.828952 [0 lua] "INCRBY" "protect:{10.0.0.0}:c" "1"`,
			true, "incrby", []string{"INCRBY", "protect:{10.0.0.0}:c", "1"}},
		{`1796110586.829001 [0 lua] "MGET" "protect:{~b0d56c1d}:b" "protect:{~b0d56c1d}:r:rate"`,
			true, "mget", []string{"MGET", "protect:{~b0d56c1d}:b", "protect:{~b0d56c1d}:r:rate"}},
		{`1796110586.830048 [0 127.0.0.1:41410] "set" "protect:limits" "{\"max_requests\":5,\"ttl_ms\":3600000}"`,
			false, "set", []string{"set", "protect:limits", `{"max_requests":5,"ttl_ms":3600000}`}},
		{`1796110586.830100 [0 [::1]:41412] "echo" "perfmark:project-redis:new:call0"`,
			false, "echo", []string{"echo", "perfmark:project-redis:new:call0"}},
		{`1796110586.830200 [0 127.0.0.1:41412] "client" "setinfo" "lib-name" "go-redis(,go1.26.8)"`,
			false, "client|setinfo", []string{"client", "setinfo", "lib-name", "go-redis(,go1.26.8)"}},
		{`1796110586.830300 [0 unix:/tmp/redis.sock] "eval" "local k = KEYS[1]\nreturn \"]\"" "1" "a\x00\\b"`,
			false, "eval", []string{"eval", "local k = KEYS[1]\nreturn \"]\"", "1", "a\x00\\b"}},
	} {
		m, ok := parseMonitor(c.line)
		if !ok {
			t.Errorf("parseMonitor(%q) failed", c.line)
			continue
		}
		if m.lua != c.lua || m.cmd() != c.cmd || strings.Join(m.args, "\x1f") != strings.Join(c.args, "\x1f") {
			t.Errorf("parseMonitor(%q) = lua %v, cmd %q, args %q; want %v, %q, %q", c.line, m.lua, m.cmd(), m.args, c.lua, c.cmd, c.args)
		}
	}
	for _, bad := range []string{"", "OK", `1796110586.8 [0 lua]`, `1796110586.8 [0 lua] "get" "unterminated`} {
		if _, ok := parseMonitor(bad); ok {
			t.Errorf("parseMonitor(%q) accepted", bad)
		}
	}
}
