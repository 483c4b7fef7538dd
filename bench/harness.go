// Package bench measures protect and other Go rate limiters side by side.
//
// Every peer is wrapped in an adapter that satisfies Limiter and is registered
// with one of RegisterMemory, RegisterRedis or RegisterHTTP (adapters live in
// adapter_*_test.go). The benchmarks in bench_*_test.go and the HTTP load test
// in http_wrk_test.go iterate over the registries, so a new adapter is measured
// by every part of the harness without touching the benchmark code.
//
// protect is plugged in by adapter_project_test.go (addresses) and
// adapter_plan_test.go (consumer plans), built against the checkout this
// directory lives in (the replace in go.mod).
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Limiter is the one contract every peer is adapted to.
//
// Allow records one event for key and reports whether it is allowed. An error
// means the decision could not be made (e.g. Redis unreachable); adapters must
// not swallow errors into allowed=false.
type Limiter interface {
	Allow(ctx context.Context, key string) (allowed bool, err error)
}

// Policy is the per-key limit every adapter is configured with: at most Limit
// events per Window (token-bucket/GCRA peers use Limit as the burst and
// Limit/Window as the refill rate).
type Policy struct {
	Limit  int64
	Window time.Duration
}

// Generous is used by all throughput measurements: nothing is ever refused,
// but every peer still runs its full accounting path (no rate.Inf shortcuts).
// 2^32 per hour is ~1.19M/s: a GCRA emission interval of ~0.84us. Do not raise
// it: at 2^40/hour the interval (3.3ns) is below the float resolution of
// redis_rate's Lua TAT (~6e-8 s at 2026 epochs), its TAT never advances and it
// skips its SET, i.e. it would be measured on a shortcut path.
var Generous = Policy{Limit: 1 << 32, Window: time.Hour}

// Strict is used by the sanity tests: the 6th event on a key must be refused.
var Strict = Policy{Limit: 5, Window: time.Hour}

// Rank orders peers in tables: baselines first, then peers, then the project.
type Rank int

const (
	RankBaseline Rank = iota
	RankPeer
	RankProject
)

// MemoryPeer is an in-process limiter.
type MemoryPeer struct {
	Name string
	Rank Rank
	Note string
	New  func(p Policy) (Limiter, error)
}

// RedisPeer is a limiter whose state lives in Redis. New receives a client
// that is already connected to the harness's Redis (loopback only) and is
// instrumented to count round trips.
type RedisPeer struct {
	Name string
	Rank Rank
	Note string
	// NoEnforce marks baselines that do not limit (the PING floor).
	NoEnforce bool
	New       func(env *RedisEnv, p Policy) (Limiter, error)
}

// HTTPPeer is an HTTP middleware. NeedsRedis peers get a non-nil env.Redis.
type HTTPPeer struct {
	Name       string
	Rank       Rank
	Note       string
	NeedsRedis bool
	NoEnforce  bool
	New        func(env *RedisEnv, p Policy) (func(http.Handler) http.Handler, error)
}

var (
	regMu       sync.Mutex
	memoryPeers []MemoryPeer
	redisPeers  []RedisPeer
	httpPeers   []HTTPPeer
)

func RegisterMemory(p MemoryPeer) { regMu.Lock(); memoryPeers = append(memoryPeers, p); regMu.Unlock() }
func RegisterRedis(p RedisPeer)   { regMu.Lock(); redisPeers = append(redisPeers, p); regMu.Unlock() }
func RegisterHTTP(p HTTPPeer)     { regMu.Lock(); httpPeers = append(httpPeers, p); regMu.Unlock() }

// MemoryPeers returns the registered in-memory peers, baselines first.
func MemoryPeers() []MemoryPeer {
	regMu.Lock()
	defer regMu.Unlock()
	out := append([]MemoryPeer(nil), memoryPeers...)
	sort.SliceStable(out, func(i, j int) bool {
		return peerLess(out[i].Rank, out[i].Name, out[j].Rank, out[j].Name)
	})
	return out
}

// RedisPeers returns the registered Redis peers, baselines first.
func RedisPeers() []RedisPeer {
	regMu.Lock()
	defer regMu.Unlock()
	out := append([]RedisPeer(nil), redisPeers...)
	sort.SliceStable(out, func(i, j int) bool {
		return peerLess(out[i].Rank, out[i].Name, out[j].Rank, out[j].Name)
	})
	return out
}

// HTTPPeers returns the registered HTTP middlewares, baselines first.
func HTTPPeers() []HTTPPeer {
	regMu.Lock()
	defer regMu.Unlock()
	out := append([]HTTPPeer(nil), httpPeers...)
	sort.SliceStable(out, func(i, j int) bool {
		return peerLess(out[i].Rank, out[i].Name, out[j].Rank, out[j].Name)
	})
	return out
}

// peerLess orders by rank, then the floors ("none", "ping") first, then name.
func peerLess(ri Rank, ni string, rj Rank, nj string) bool {
	if ri != rj {
		return ri < rj
	}
	fi, fj := ni == "none" || ni == "ping", nj == "none" || nj == "ping"
	if fi != fj {
		return fi
	}
	return ni < nj
}

// CloseLimiter releases background goroutines / connections if the adapter
// has any.
func CloseLimiter(l Limiter) {
	if c, ok := l.(io.Closer); ok {
		_ = c.Close()
	}
}

// ClientIP is the key function used by the generic middleware: the host part
// of RemoteAddr (no proxy headers are trusted).
func ClientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// LimiterMiddleware turns any Limiter into net/http middleware keyed by client
// IP. It is used for peers that ship no middleware of their own (x/time/rate,
// redis_rate, the PING floor) and can be used for the project if its own
// middleware is not ready yet.
func LimiterMiddleware(l Limiter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ok, err := l.Allow(r.Context(), ClientIP(r))
			if err != nil {
				http.Error(w, "limiter error", http.StatusInternalServerError)
				return
			}
			if !ok {
				http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// IPKey returns a distinct IPv4-looking key for i (10.a.b.c); keys are what an
// IP protection engine will see in production.
func IPKey(i int) string {
	b := make([]byte, 0, 15)
	b = append(b, "10."...)
	b = strconv.AppendInt(b, int64((i>>16)&255), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64((i>>8)&255), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(i&255), 10)
	if i >= 1<<24 {
		b = append(b, '#')
		b = strconv.AppendInt(b, int64(i>>24), 10)
	}
	return string(b)
}

var (
	keySetMu sync.Mutex
	keySets  = map[int][]string{}
)

// KeySet returns n distinct keys (cached).
func KeySet(n int) []string {
	keySetMu.Lock()
	defer keySetMu.Unlock()
	if ks, ok := keySets[n]; ok {
		return ks
	}
	ks := make([]string, n)
	for i := range ks {
		ks[i] = IPKey(i)
	}
	keySets[n] = ks
	return ks
}

// ErrRefused is returned by helpers when a generous policy refused an event:
// that would invalidate a throughput number.
var ErrRefused = errors.New("refused under the generous policy")

func refusedErr(peer string, n int64) error {
	return fmt.Errorf("%s: %d events %w", peer, n, ErrRefused)
}
