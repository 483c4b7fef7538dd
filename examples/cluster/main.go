// Command cluster runs three instances of a service on three ports, each
// with its own protector and Redis client, all sharing one Redis; then it
// sends one client's requests to them in turn and prints what came back.
// The limit is exact, as if there were one instance:
//
//	go run ./examples/cluster -redis redis://127.0.0.1:6379/0
//	writing under the namespace cluster-demo: (its keys from an earlier run are deleted first)
//	...
//	requests   1–100: 200
//	requests 101–250: 429
//	requests 251–300: 403
//
// It writes only under its namespace (-namespace, "cluster-demo:" by
// default), which it prints, and leaves the ban it wrote there for
// protectctl to show; -clean deletes every key under the namespace and
// exits. The three instances listen on free loopback ports, which it
// prints; -serve keeps them running for curl afterwards, on
// 127.0.0.1:8101, 8102 and 8103.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/redisstore"
)

// DefaultNamespace is where the demo writes unless told otherwise.
const DefaultNamespace = "cluster-demo:"

// instance is one copy of the service.
type instance struct {
	URL   string
	srv   *http.Server
	p     *protect.Protector
	store *redisstore.Store
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
		store, err := redisstore.Dial(redisURL, redisstore.Options{Logger: logger})
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
			StoreTimeout: time.Second,        // nor refuse a request that a busy machine answered late
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

// clean deletes every key under ns in the Redis at redisURL and returns
// how many there were.
func clean(ctx context.Context, redisURL, ns string) (int, error) {
	if ns == "" {
		return 0, fmt.Errorf("no namespace: refusing to delete every key")
	}
	store, err := redisstore.Dial(redisURL, redisstore.Options{RangeRefresh: -1})
	if err != nil {
		return 0, err
	}
	defer store.Close()
	c := store.Client()
	n := 0
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, globEscape(ns)+"*", 1000).Result()
		if err != nil {
			return n, fmt.Errorf("scanning %s*: %w", ns, err)
		}
		for _, k := range keys { // one by one: keys of several slots on a cluster
			if err := c.Del(ctx, k).Err(); err != nil {
				return n, err
			}
			n++
		}
		if cursor = next; cursor == 0 {
			return n, nil
		}
	}
}

// globEscape quotes the characters SCAN MATCH reads as a pattern.
func globEscape(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(b)
}

func main() {
	def := os.Getenv("HTTP_PROTECT_REDIS_URL")
	if def == "" {
		def = "redis://127.0.0.1:6379/0"
	}
	redisURL := flag.String("redis", def, "Redis URL shared by the three instances")
	ns := flag.String("namespace", DefaultNamespace, "the namespace the demo writes under (and deletes at its start)")
	requests := flag.Int("requests", 300, "requests to send round robin")
	serve := flag.Bool("serve", false, "keep serving after the demo (ports 8101-8103)")
	cleanOnly := flag.Bool("clean", false, "delete every key under -namespace and exit")
	flag.Parse()
	if *cleanOnly {
		n, err := clean(context.Background(), *redisURL, *ns)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
			os.Exit(1)
		}
		fmt.Printf("deleted %d keys under %s\n", n, *ns)
		return
	}
	if err := run(*redisURL, *ns, *requests, *serve, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(redisURL, ns string, requests int, serve bool, out io.Writer) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	// The demo starts from nothing: a ban from an earlier run would
	// answer 403 from the first request.
	if _, err := clean(context.Background(), redisURL, ns); err != nil {
		return err
	}
	fmt.Fprintf(out, "writing under the namespace %s (its keys from an earlier run are deleted first)\n", ns)
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
	shown := redisURL
	if u, err := url.Parse(redisURL); err != nil || u.User != nil {
		shown = "URL" // never print a password
	}
	fmt.Fprintf(out, "the ban:   protectctl -redis %s -namespace %s bans\nclean up:  go run ./examples/cluster -redis %s -namespace %s -clean\n",
		shown, ns, shown, ns)
	if !serve {
		return nil
	}
	fmt.Fprintln(out, "serving; Ctrl-C stops")
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	<-ctx.Done()
	return nil
}
