package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/httpprotect/protect/redisstore"
)

// redisURLs are the Redis servers the demo is checked against: miniredis
// always, and a real redis-server when PROTECT_REDIS_ADDR is set.
func redisURLs(t *testing.T) map[string]string {
	urls := map[string]string{"miniredis": "redis://" + miniredis.RunT(t).Addr()}
	if addr := os.Getenv("PROTECT_REDIS_ADDR"); addr != "" {
		urls["redis-server"] = "redis://" + addr
	} else if os.Getenv("CI") != "" {
		t.Fatal("CI is set but PROTECT_REDIS_ADDR is not")
	}
	return urls
}

func TestOneExactLimit(t *testing.T) {
	for name, url := range redisURLs(t) {
		t.Run(name, func(t *testing.T) {
			ns := fmt.Sprintf("cluster-demo-test:%d:", time.Now().UnixNano())
			leftAlone := mustClean(t, url, ns)
			var out strings.Builder
			if err := run(url, ns, 300, false, &out); err != nil {
				t.Fatal(err)
			}
			want := "requests   1–100: 200\nrequests 101–250: 429\nrequests 251–300: 403\n"
			if !strings.Contains(out.String(), want) || strings.Count(out.String(), "instance on http://127.0.0.1:") != 3 ||
				!strings.HasPrefix(out.String(), "writing under the namespace "+ns+" ") ||
				!strings.Contains(out.String(), "-namespace "+ns+" bans") {
				t.Fatalf("run(%s, 300) printed\n%s\nwant 100 × 200, 150 × 429, 50 × 403 from 3 instances under the namespace", ns, out.String())
			}
			// The run left its ban for protectctl to show, under ns.
			if n := countKeys(t, url, ns); n == 0 {
				t.Fatalf("countKeys(%s) after the run = 0, want its ban left for protectctl", ns)
			}
			// A second run starts from nothing.
			out.Reset()
			if err := run(url, ns, 300, false, &out); err != nil || !strings.Contains(out.String(), want) {
				t.Fatalf("run(%s, 300) again = %v, printing\n%s\nwant nil and the same counts", ns, err, out.String())
			}
			leftAlone()
		})
	}
}

// mustClean deletes every key under ns when the test ends and checks, by
// a SCAN, that none is left there, nor anywhere under the default
// namespaces the demo must not touch.
func mustClean(t *testing.T, url, ns string) (check func()) {
	t.Helper()
	before := map[string]int{}
	for _, other := range []string{"protect:", DefaultNamespace} {
		before[other] = countKeys(t, url, other)
	}
	check = func() {
		t.Helper()
		for other, n := range before {
			if got := countKeys(t, url, other); got > n {
				t.Errorf("countKeys(%s) after the demo = %d, want %d: the demo wrote only under its namespace", other, got, n)
			}
		}
	}
	t.Cleanup(func() {
		if _, err := clean(context.Background(), url, ns); err != nil {
			t.Error(err)
		}
		if n := countKeys(t, url, ns); n != 0 {
			t.Errorf("countKeys(%s) after clean = %d, want 0", ns, n)
		}
	})
	return check
}

func countKeys(t *testing.T, url, ns string) int {
	t.Helper()
	store, err := redisstore.Dial(url, redisstore.Options{RangeRefresh: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	n := 0
	iter := store.Client().Scan(context.Background(), 0, globEscape(ns)+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestClean(t *testing.T) {
	url := "redis://" + miniredis.RunT(t).Addr()
	if _, err := clean(context.Background(), url, ""); err == nil {
		t.Fatal("clean(\"\") = nil error, want an error: an empty namespace would delete every key")
	}
	if got := globEscape(`a*b?[c]\`); got != `a\*b\?\[c\]\\` {
		t.Fatalf("globEscape(%q) = %q, want %q", `a*b?[c]\`, got, `a\*b\?\[c\]\\`)
	}
}

// Every instance answers from the same count: each of the three sees
// its own requests refused once the shared stream passes the limit.
func TestEachInstanceRefuses(t *testing.T) {
	instances, stop, err := startInstances("redis://"+miniredis.RunT(t).Addr(), "t:", 3, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	codes, err := drive(t.Context(), instances, 103)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(codes[99:]); got != "[200 429 429 429]" {
		t.Fatalf("drive(103) codes 100–103 = %s, want [200 429 429 429]", got)
	}
}

func TestUnreachableRedis(t *testing.T) {
	var out strings.Builder
	err := run("redis://127.0.0.1:1/0", "t:", 3, false, &out)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("run(redis://127.0.0.1:1/0) = %v, want an error naming 127.0.0.1:1", err)
	}
}
