package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHTTPWrk loads an net/http server on loopback, wrapped in each HTTP
// peer's middleware (or none), with wrk, and reports requests/s. Rounds are
// interleaved (every peer once per round, rotating start) so drift on a noisy
// machine hits every peer alike; the table shows medians and the ratio to the
// no-middleware server. Enabled with PERF_HTTP=1.
func TestHTTPWrk(t *testing.T) {
	if os.Getenv("PERF_HTTP") != "1" {
		t.Skip("PERF_HTTP!=1")
	}
	wrk := envOr("PERF_WRK", "/usr/bin/wrk")
	if _, err := os.Stat(wrk); err != nil {
		t.Skipf("wrk not found at %s", wrk)
	}
	dur := envOr("PERF_WRK_DURATION", "8s")
	conns := envOr("PERF_WRK_CONNS", "32")
	threads := envOr("PERF_WRK_THREADS", "2")
	rounds, _ := strconv.Atoi(envOr("PERF_HTTP_ROUNDS", "3"))
	if rounds < 1 {
		rounds = 1
	}
	only := os.Getenv("PERF_HTTP_PEERS") // optional regexp
	var onlyRe *regexp.Regexp
	if only != "" {
		onlyRe = regexp.MustCompile(only)
	}

	var env *RedisEnv
	if os.Getenv("PERF_REDIS_ADDR") != "" {
		env = redisEnvOrSkip(t)
		defer env.Close()
	}
	var peers []HTTPPeer
	var skipped []string
	for _, p := range HTTPPeers() {
		if onlyRe != nil && p.Name != "none" && !onlyRe.MatchString(p.Name) {
			continue
		}
		if p.NeedsRedis && env == nil {
			skipped = append(skipped, p.Name+" (no Redis)")
			continue
		}
		peers = append(peers, p)
	}

	type sample struct {
		rps, okRps float64
		latMs      float64
		non2xx     int
		sockErr    string
		codes      string
	}
	results := map[string][]sample{}
	var raw strings.Builder
	ctx := context.Background()

	for r := 0; r < rounds; r++ {
		for i := range peers {
			p := peers[(i+r)%len(peers)]
			if p.NeedsRedis {
				if err := env.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			mw, err := p.New(env, Generous)
			if err != nil {
				t.Fatalf("%s: %v", p.Name, err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			codes := &statusCounter{}
			srv := &http.Server{Handler: codes.wrap(mw(okHandler())), ReadHeaderTimeout: 5 * time.Second}
			go func() { _ = srv.Serve(ln) }()
			url := "http://" + ln.Addr().String() + "/"
			if resp, err := http.Get(url); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: warm-up request: %v %v", p.Name, resp, err)
			} else {
				resp.Body.Close()
			}
			cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			out, err := exec.CommandContext(cctx, wrk, "-t"+threads, "-c"+conns, "-d"+dur, url).CombinedOutput()
			cancel()
			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			_ = srv.Shutdown(sctx)
			scancel()
			if env != nil {
				env.CloseClients()
			}
			if err != nil {
				t.Fatalf("%s: wrk: %v\n%s", p.Name, err, out)
			}
			s := sample{rps: parseFloat(`Requests/sec:\s+([0-9.]+)`, out), latMs: parseLatency(out)}
			if m := regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`).FindSubmatch(out); m != nil {
				s.non2xx, _ = strconv.Atoi(string(m[1]))
			}
			if m := regexp.MustCompile(`Socket errors:[^\n]*`).Find(out); m != nil {
				s.sockErr = string(m)
			}
			s.okRps = s.rps
			if total := parseFloat(`(\d+) requests in`, out); total > 0 {
				s.okRps = s.rps * (total - float64(s.non2xx)) / total
			}
			s.codes = codes.String()
			results[p.Name] = append(results[p.Name], s)
			fmt.Fprintf(&raw, "== round %d, %s\n%s\n", r+1, p.Name, out)
			t.Logf("round %d %-16s %10.0f req/s  non2xx=%d codes=%s %s", r+1, p.Name, s.rps, s.non2xx, s.codes, s.sockErr)
		}
	}

	// Ratio to no middleware: median over rounds of (peer req/s / none req/s
	// in the same round), so slow drift of the machine cancels out.
	baseByRound := results["none"]
	pairedRatio := func(ss []sample) float64 {
		var r []float64
		for i, s := range ss {
			if i < len(baseByRound) && baseByRound[i].rps > 0 {
				r = append(r, s.rps/baseByRound[i].rps)
			}
		}
		return medianOf(r, func(x float64) float64 { return x })
	}
	var tb strings.Builder
	fmt.Fprintf(&tb, "# HTTP: wrk -t%s -c%s -d%s against 127.0.0.1, %d interleaved rounds, medians\n\n", threads, conns, dur, rounds)
	fmt.Fprintf(&tb, "| middleware | backend | req/s (median) | x no-middleware (median of per-round ratios) | 2xx req/s (median) | mean latency ms (median) | min..max req/s | non-2xx (all rounds) | note |\n|---|---|---:|---:|---:|---:|---|---:|---|\n")
	for _, p := range peers {
		ss := results[p.Name]
		rps := medianOf(ss, func(s sample) float64 { return s.rps })
		okRps := medianOf(ss, func(s sample) float64 { return s.okRps })
		lat := medianOf(ss, func(s sample) float64 { return s.latMs })
		lo, hi := ss[0].rps, ss[0].rps
		non2xx := 0
		var codes []string
		for _, s := range ss {
			lo, hi = min(lo, s.rps), max(hi, s.rps)
			non2xx += s.non2xx
			if s.non2xx > 0 {
				codes = append(codes, s.codes)
			}
		}
		note := p.Note
		if len(codes) > 0 {
			note += "; status codes per round: " + strings.Join(codes, " / ")
		}
		backend := "memory"
		if p.NeedsRedis {
			backend = "redis"
		}
		if p.Name == "none" {
			backend = "-"
		}
		fmt.Fprintf(&tb, "| %s | %s | %.0f | %.2f | %.0f | %.2f | %.0f..%.0f | %d | %s |\n", p.Name, backend, rps, pairedRatio(ss), okRps, lat, lo, hi, non2xx, note)
	}
	if len(skipped) > 0 {
		fmt.Fprintf(&tb, "\nskipped: %s\n", strings.Join(skipped, ", "))
	}
	t.Log("\n" + tb.String())
	writeResult(t, "http.txt", tb.String())
	writeResult(t, "http_raw.txt", raw.String())
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func parseFloat(re string, out []byte) float64 {
	m := regexp.MustCompile(re).FindSubmatch(out)
	if m == nil {
		return 0
	}
	f, _ := strconv.ParseFloat(string(m[1]), 64)
	return f
}

// parseLatency reads wrk's "Latency  1.23ms ..." average, in ms.
func parseLatency(out []byte) float64 {
	m := regexp.MustCompile(`Latency\s+([0-9.]+)(us|ms|s)\b`).FindSubmatch(out)
	if m == nil {
		return 0
	}
	f, _ := strconv.ParseFloat(string(m[1]), 64)
	switch string(m[2]) {
	case "us":
		return f / 1000
	case "s":
		return f * 1000
	}
	return f
}

func medianOf[T any](xs []T, f func(T) float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// statusCounter tallies response codes (pooled wrapper, ~no overhead; the
// same wrapper is on every server including the no-middleware one).
type statusCounter struct {
	n    [600]atomic.Int64
	pool sync.Pool
}

type statusRec struct {
	http.ResponseWriter
	code int
}

func (s *statusRec) WriteHeader(c int) {
	if s.code == 0 {
		s.code = c
	}
	s.ResponseWriter.WriteHeader(c)
}

func (s *statusRec) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (c *statusCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, _ := c.pool.Get().(*statusRec)
		if rec == nil {
			rec = &statusRec{}
		}
		rec.ResponseWriter, rec.code = w, 0
		h.ServeHTTP(rec, r)
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		if code > 0 && code < len(c.n) {
			c.n[code].Add(1)
		}
		rec.ResponseWriter = nil
		c.pool.Put(rec)
	})
}

func (c *statusCounter) String() string {
	var parts []string
	for code := range c.n {
		if v := c.n[code].Load(); v > 0 {
			parts = append(parts, fmt.Sprintf("%d:%d", code, v))
		}
	}
	return strings.Join(parts, ",")
}
