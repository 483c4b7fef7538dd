package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
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
			var out strings.Builder
			if err := run(url, 300, false, &out); err != nil {
				t.Fatal(err)
			}
			want := "requests   1–100: 200\nrequests 101–250: 429\nrequests 251–300: 403\n"
			if !strings.HasSuffix(out.String(), want) || strings.Count(out.String(), "instance on http://127.0.0.1:") != 3 {
				t.Fatalf("output:\n%s", out.String())
			}
		})
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
		t.Fatalf("codes 100–103: %s", got)
	}
}

func TestUnreachableRedis(t *testing.T) {
	var out strings.Builder
	err := run("redis://127.0.0.1:1/0", 3, false, &out)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("demo without Redis: %v", err)
	}
}
