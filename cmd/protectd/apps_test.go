package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/needs"
)

// The apps of examples/express and examples/fastapi, run as real
// processes in front of an in-process protectd: each asks /verify from
// its own middleware, as docs/protectd.md shows.

// needExpress returns node, or skips (fails under CI) without it or
// without examples/express/node_modules (npm ci).
func needExpress(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		needs.Missing(t, "node is not installed (.ci/parts/60-node.sh installs it)")
	}
	if _, err := os.Stat(filepath.Join(exampleDir("express"), "node_modules", "express", "package.json")); err != nil {
		needs.Missing(t, "examples/express has no node_modules/express: run npm ci there (.ci/parts/60-node.sh does)")
	}
	return node
}

// debianPython is Debian's python3, which has Debian's python3-fastapi;
// the python3 on PATH may be another (pyenv's).
const debianPython = "/usr/bin/python3"

// needFastAPI skips (fails under CI) without Debian's python3 and its
// fastapi, uvicorn and httpx.
func needFastAPI(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(debianPython, "-c", "import fastapi, uvicorn, httpx").CombinedOutput(); err != nil {
		needs.Missing(t, debianPython+" cannot import fastapi, uvicorn and httpx (apt-get install python3-fastapi python3-uvicorn python3-httpx; .ci/parts/61-fastapi.sh does): "+strings.TrimSpace(string(out)))
	}
}

func exampleDir(name string) string { return filepath.Join("..", "..", "examples", name) }

// lockedBuffer is a process's stderr, read while it writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startApp runs bin args in dir with env added, waits for the line
// "listening on PORT" it prints, and returns 127.0.0.1:PORT. The process
// is stopped (SIGTERM, then SIGKILL) in t.Cleanup.
func startApp(t *testing.T, dir, bin string, args []string, env ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s %v: %v", bin, args, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				port <- p
			}
		}
	}()
	select {
	case p := <-port:
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			t.Fatalf("%s %v printed listening on %q, want a port", bin, args, p)
		}
		return "127.0.0.1:" + p
	case <-exited:
		t.Fatalf("%s %v exited before it listened, want it listening; stderr:\n%s", bin, args, stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s %v: no listening line after 30s, want one; stderr:\n%s", bin, args, stderr)
	}
	return ""
}

// TestExpressThreeInstances: three Express instances behind one protectd
// give one client exactly 100 served, 150 refused with 429 and 50 banned
// with 403, each refusal with protectd's Retry-After, RateLimit fields
// and problem+json body, whatever the client forges; with protectd
// stopped, the app fails closed.
func TestExpressThreeInstances(t *testing.T) {
	node := needExpress(t)
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1",
		"HTTP_PROTECT_MAX_REQUESTS=100", "HTTP_PROTECT_BAN_LIMIT=250", "HTTP_PROTECT_TTL=1h")
	var apps []string
	for i := range 3 {
		apps = append(apps, startApp(t, exampleDir("express"), node, []string{"app.js"},
			"PORT=0", "PROTECTD_URL=http://"+d.addr, "INSTANCE="+strconv.Itoa(i), "TRUST_PROXY=127.0.0.1"))
	}
	// The client is 127.0.0.2: neither protectd's trusted peer nor the
	// apps' trusted proxy, so its X-Forwarded-For is not believed.
	c := clientFrom("127.0.0.2")
	counts := map[string]int{}
	instances := map[string]int{}
	for i := range 300 {
		a := get(t, c, "http://"+apps[i%3]+"/",
			"X-Forwarded-For", "6.6.6."+strconv.Itoa(i%250+1), "X-Protect-Consumer", "acme", "X-Protect-Plan", "pro")
		switch a.code {
		case 200:
			counts["served"]++
			var body struct{ Hello, Instance string }
			if err := json.Unmarshal([]byte(a.body), &body); err != nil || body.Hello != "127.0.0.2" {
				t.Fatalf("request %d: body %q (%v), want the client 127.0.0.2", i+1, a.body, err)
			}
			instances[body.Instance]++
		case 429:
			counts["limited"]++
			if code := problemCode(t, a); code != "rate_limited" {
				t.Fatalf("request %d: 429 code %q, want rate_limited", i+1, code)
			}
		case 403:
			counts["banned"]++
			if code := problemCode(t, a); code != "banned" {
				t.Fatalf("request %d: 403 code %q, want banned", i+1, code)
			}
		default:
			t.Fatalf("request %d = %d %q, want 200, 429 or 403", i+1, a.code, a.body)
		}
		if i == 0 {
			if got, want := a.header.Get("Ratelimit"), `"protect";r=99;t=3600`; got != want {
				t.Errorf("first answer RateLimit = %q, want %q", got, want)
			}
			if got, want := a.header.Get("Ratelimit-Policy"), `"protect";q=100;w=3600`; got != want {
				t.Errorf("first answer RateLimit-Policy = %q, want %q", got, want)
			}
		}
		if a.code != 200 {
			if ra := a.header.Get("Retry-After"); ra != "3600" || a.header.Get("Cache-Control") != "no-store" {
				t.Fatalf("request %d = %d Retry-After %q Cache-Control %q, want 3600 and no-store", i+1, a.code, ra, a.header.Get("Cache-Control"))
			}
		}
	}
	if counts["served"] != 100 || counts["limited"] != 150 || counts["banned"] != 50 {
		t.Fatalf("300 requests over 3 instances = %v, want served 100, limited 150, banned 50", counts)
	}
	if len(instances) != 3 {
		t.Fatalf("served by instances %v, want all three", instances)
	}
	d.stop()
	a := get(t, c, "http://"+apps[0]+"/")
	if a.code != 503 || a.header.Get("Retry-After") != "5" || problemCode(t, a) != "unavailable" {
		t.Fatalf("with protectd stopped = %d %v %q, want 503, Retry-After 5, unavailable", a.code, a.header, a.body)
	}
}

// TestFastAPIPlans: the FastAPI app, under its plans.json, holds Acme's two API keys to one
// bucket of its plan (5 requests, the 6th refused with 429, Retry-After:
// 1 and rate_limited), Globex on the same plan is not affected, and a
// monthly quota refuses with quota_exceeded until the month ends.
func TestFastAPIPlans(t *testing.T) {
	needFastAPI(t)
	// A bucket of 5 that refills one a second: the 6th request, made
	// within a second of the first, waits for less than a second.
	// The plans file shipped beside the app, as its README runs it.
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_PLANS="+filepath.Join(exampleDir("fastapi"), "plans.json"))
	app := "http://" + startApp(t, exampleDir("fastapi"), debianPython, []string{"main.py"},
		"PORT=0", "PROTECTD_URL=http://"+d.addr, "PYTHONDONTWRITEBYTECODE=1")
	c := clientFrom("127.0.0.2")
	// A first request warms the app's connection to protectd, so that the
	// six that follow fit in a second.
	if a := get(t, c, app+"/"); a.code != 200 {
		t.Fatalf("GET / without a key = %d %q, want 200", a.code, a.body)
	}
	keys := []string{"acme-key-1", "acme-key-2", "acme-key-1", "acme-key-2", "acme-key-1"}
	for i, k := range keys {
		a := get(t, c, app+"/", "X-Api-Key", k)
		if a.code != 200 {
			t.Fatalf("request %d of Acme (%s) = %d %q, want 200", i+1, k, a.code, a.body)
		}
		if got, want := a.header.Get("Ratelimit-Policy"), `"burst";q=1;w=1`; got != want {
			t.Fatalf("request %d of Acme: RateLimit-Policy = %q, want %q", i+1, got, want)
		}
	}
	a := get(t, c, app+"/", "X-Api-Key", "acme-key-2")
	if a.code != 429 || a.header.Get("Retry-After") != "1" || problemCode(t, a) != "rate_limited" {
		t.Fatalf("6th request of Acme = %d Retry-After %q %q, want 429, Retry-After 1, rate_limited", a.code, a.header.Get("Retry-After"), a.body)
	}
	if got, want := a.header.Get("Ratelimit"), `"burst";r=0;t=1`; got != want {
		t.Errorf("6th request of Acme: RateLimit = %q, want %q", got, want)
	}
	a = get(t, c, app+"/", "X-Api-Key", "globex-key")
	if a.code != 200 || !strings.HasPrefix(a.header.Get("Ratelimit"), `"burst";r=4;`) {
		t.Fatalf("Globex after Acme's refusal = %d RateLimit %q, want 200 and 4 left", a.code, a.header.Get("Ratelimit"))
	}
	for i := range 3 {
		if a := get(t, c, app+"/", "X-Api-Key", "initech-key"); a.code != 200 {
			t.Fatalf("request %d of Initech's trial = %d %q, want 200", i+1, a.code, a.body)
		}
	}
	a = get(t, c, app+"/", "X-Api-Key", "initech-key")
	ra, err := strconv.Atoi(a.header.Get("Retry-After"))
	if a.code != 429 || problemCode(t, a) != "quota_exceeded" || err != nil || ra < 1 || ra > 31*24*3600 {
		t.Fatalf("4th request of Initech's trial = %d Retry-After %q %q, want 429, quota_exceeded, Retry-After to the month's end",
			a.code, a.header.Get("Retry-After"), a.body)
	}
	now := time.Now().UTC()
	end := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	if want := int(end.Sub(now).Seconds()); ra < want-60 || ra > want+60 {
		t.Fatalf("4th request of Initech's trial: Retry-After %d, want about %d (the month's end)", ra, want)
	}
}
