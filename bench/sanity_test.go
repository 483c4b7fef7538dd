package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Every adapter must really be wired to its policy: under Strict (5 per hour)
// the 6th event on a key is refused and another key is unaffected; under
// Generous nothing is refused. This is what makes the throughput numbers
// comparable (nobody is benchmarked on a shortcut path).

func checkEnforce(t *testing.T, name string, l Limiter, noEnforce bool) {
	t.Helper()
	ctx := context.Background()
	for i := 1; i <= 6; i++ {
		ok, err := l.Allow(ctx, "198.51.100.7")
		if err != nil {
			t.Fatalf("%s: call %d: %v", name, i, err)
		}
		want := i <= 5 || noEnforce
		if ok != want {
			t.Fatalf("%s: call %d allowed=%v, want %v", name, i, ok, want)
		}
	}
	if ok, err := l.Allow(ctx, "198.51.100.8"); err != nil || !ok {
		t.Fatalf("%s: other key allowed=%v err=%v, want allowed", name, ok, err)
	}
}

func checkGenerous(t *testing.T, name string, l Limiter, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		ok, err := l.Allow(ctx, IPKey(i%7))
		if err != nil || !ok {
			t.Fatalf("%s: generous call %d allowed=%v err=%v", name, i, ok, err)
		}
	}
}

func TestMemoryPeers(t *testing.T) {
	if len(MemoryPeers()) == 0 {
		t.Fatal("no memory peers registered")
	}
	for _, p := range MemoryPeers() {
		t.Run(p.Name, func(t *testing.T) {
			l, err := p.New(Strict)
			if err != nil {
				t.Fatal(err)
			}
			defer CloseLimiter(l)
			checkEnforce(t, p.Name, l, false)
			g, err := p.New(Generous)
			if err != nil {
				t.Fatal(err)
			}
			defer CloseLimiter(g)
			checkGenerous(t, p.Name, g, 10_000)
		})
	}
}

func TestRedisPeers(t *testing.T) {
	env := redisEnvOrSkip(t)
	defer env.Close()
	for _, p := range RedisPeers() {
		t.Run(p.Name, func(t *testing.T) {
			defer env.CloseClients()
			if err := env.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			l, err := p.New(env, Strict)
			if err != nil {
				t.Fatal(err)
			}
			defer CloseLimiter(l)
			checkEnforce(t, p.Name, l, p.NoEnforce)
			g, err := p.New(env, Generous)
			if err != nil {
				t.Fatal(err)
			}
			defer CloseLimiter(g)
			checkGenerous(t, p.Name, g, 500)
		})
	}
}

func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
}

func TestHTTPPeers(t *testing.T) {
	var env *RedisEnv
	for _, p := range HTTPPeers() {
		t.Run(p.Name, func(t *testing.T) {
			if p.NeedsRedis {
				if env == nil {
					env = redisEnvOrSkip(t)
				}
				defer env.CloseClients()
				if err := env.Flush(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			mw, err := p.New(env, Strict)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(mw(okHandler()))
			defer srv.Close()
			for i := 1; i <= 6; i++ {
				resp, err := http.Get(srv.URL)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				want := http.StatusOK
				if i == 6 && !p.NoEnforce {
					want = http.StatusTooManyRequests
				}
				if resp.StatusCode != want {
					t.Fatalf("request %d: status %d, want %d", i, resp.StatusCode, want)
				}
			}
		})
	}
	if env != nil {
		env.Close()
	}
}

func TestIPKeyDistinct(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1<<17; i++ {
		k := IPKey(i)
		if seen[k] {
			t.Fatalf("duplicate key %q at %d", k, i)
		}
		seen[k] = true
	}
	if got := IPKey(0x0a0b0c); got != fmt.Sprintf("10.%d.%d.%d", 0x0a, 0x0b, 0x0c) {
		t.Fatalf("IPKey = %q", got)
	}
}
