// Command cluster runs three instances of a service on three ports, each
// with its own protector and Redis client, all sharing one Redis; then it
// sends one client's requests to them in turn and prints what came back.
// The limit is exact, as if there were one instance:
//
//	go run ./examples/cluster -redis redis://127.0.0.1:6379/0
//	requests   1–100: 200
//	requests 101–250: 429
//	requests 251–300: 403
//
// -serve keeps the three instances running for curl afterwards.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/httpprotect/protect"
)

// instance is one copy of the service.
type instance struct {
	URL   string
	srv   *http.Server
	p     *protect.Protector
	store *protect.RedisStore
}

// startInstances starts n instances on 127.0.0.1 ports from firstPort
// (0: any free ports), sharing the Redis at redisURL under namespace ns.
func startInstances(redisURL, ns string, n, firstPort int, logger *slog.Logger) ([]*instance, func(), error) {
	var all []*instance
	stop := func() {
		for _, in := range all {
			in.srv.Close()
			in.p.Close()
			in.store.Close()
		}
	}
	for i := range n {
		store, err := protect.DialRedis(redisURL, protect.RedisOptions{Logger: logger})
		if err != nil {
			stop()
			return nil, nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = store.Ping(ctx)
		cancel()
		if err != nil {
			store.Close()
			stop()
			return nil, nil, err
		}
		p, err := protect.New(protect.Config{
			Store: store, Namespace: ns, BanNamespace: ns, MaxRequests: 100, BanLimit: 250,
			OnStoreError: protect.FailClosed, // a demo of exactness should not quietly go local
			Logger:       logger,
		})
		if err != nil {
			store.Close()
			stop()
			return nil, nil, err
		}
		port := 0
		if firstPort != 0 {
			port = firstPort + i
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			p.Close()
			store.Close()
			stop()
			return nil, nil, err
		}
		name := fmt.Sprintf("instance %d", i+1)
		mux := http.NewServeMux()
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello from", name) })
		in := &instance{URL: "http://" + l.Addr().String(), srv: &http.Server{Handler: p.Middleware(mux), ReadHeaderTimeout: 5 * time.Second}, p: p, store: store}
		go in.srv.Serve(l)
		all = append(all, in)
	}
	return all, stop, nil
}

// drive sends n requests round robin and returns the status codes.
func drive(ctx context.Context, instances []*instance, n int) ([]int, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	codes := make([]int, 0, n)
	for i := range n {
		req, _ := http.NewRequestWithContext(ctx, "GET", instances[i%len(instances)].URL+"/", nil)
		resp, err := client.Do(req)
		if err != nil {
			return codes, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	return codes, nil
}

// summarize prints runs of equal status codes.
func summarize(out io.Writer, codes []int) {
	for start := 0; start < len(codes); {
		end := start
		for end+1 < len(codes) && codes[end+1] == codes[start] {
			end++
		}
		fmt.Fprintf(out, "requests %3d–%3d: %d\n", start+1, end+1, codes[start])
		start = end + 1
	}
}

func main() {
	def := os.Getenv("HTTP_PROTECT_REDIS_URL")
	if def == "" {
		def = "redis://127.0.0.1:6379/0"
	}
	redisURL := flag.String("redis", def, "Redis URL shared by the three instances")
	requests := flag.Int("requests", 300, "requests to send round robin")
	serve := flag.Bool("serve", false, "keep serving after the demo (ports 8101-8103)")
	flag.Parse()
	if err := run(*redisURL, *requests, *serve, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(redisURL string, requests int, serve bool, out io.Writer) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	// A fresh namespace per run, so that the demo starts from nothing and
	// leaves the Redis it uses alone.
	ns := fmt.Sprintf("cluster-demo:%x:", rand.Uint64())
	firstPort := 0
	if serve {
		firstPort = 8101
	}
	instances, stop, err := startInstances(redisURL, ns, 3, firstPort, logger)
	if err != nil {
		return err
	}
	defer stop()
	for _, in := range instances {
		fmt.Fprintln(out, "instance on", in.URL)
	}
	fmt.Fprintf(out, "%d requests from one client, round robin; MaxRequests 100, BanLimit 250\n", requests)
	codes, err := drive(context.Background(), instances, requests)
	if err != nil {
		return err
	}
	summarize(out, codes)
	if !serve {
		return nil
	}
	fmt.Fprintln(out, "serving; Ctrl-C stops")
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	<-ctx.Done()
	return nil
}
