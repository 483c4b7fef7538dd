package protect

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README's quick start works as written: its Config, copied here, is
// checked against the README's text, and a health check from the load
// balancer's subnet is served and never counted.
func TestReadmeQuickStart(t *testing.T) {
	const config = `p, err := protect.New(protect.Config{
	TrustedProxies: []string{"10.0.0.0/8"}, // your load balancer, nothing else
	SafeNetworks:   []string{"10.0.0.0/8"}, // its health checks: served, never counted
})`
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(readme), "## Quick start")
	if start < 0 || !strings.Contains(string(readme[start:]), "```go\n"+config+"\n") {
		t.Fatalf("README.md's Quick start does not hold this test's config, want it to:\n%s", config)
	}
	p, _ := newTestProtector(t, Config{
		TrustedProxies: []string{"10.0.0.0/8"}, // your load balancer, nothing else
		SafeNetworks:   []string{"10.0.0.0/8"}, // its health checks: served, never counted
		MaxRequests:    2,                      // (the test's, to reach the limit)
	})
	send := func(peer, xff string) (int, Decision) {
		r := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/healthz", nil)
		r.RemoteAddr = peer
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		var d Decision
		h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { d, _ = FromContext(r.Context()) }))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, d
	}
	// The load balancer's own health check: no X-Forwarded-For.
	for range 5 {
		if code, d := send("10.1.2.3:40000", ""); code != 200 || d.Status != Safe {
			t.Fatalf("send(10.1.2.3, no X-Forwarded-For), the balancer's health check = %d %v, want 200 safe", code, d.Status)
		}
	}
	// A client through the load balancer is counted as itself, and a
	// client that writes a safe address into the header gets nothing for
	// it: the balancer appends the address it saw.
	for i := range 2 {
		if code, d := send("10.1.2.3:40000", "10.9.9.9, 203.0.113.7"); code != 200 || d.Status != Allowed || d.Addr.String() != "203.0.113.7" {
			t.Fatalf("send(10.1.2.3, X-Forwarded-For 10.9.9.9, 203.0.113.7) request %d = %d %v %v, want 200 allowed from 203.0.113.7", i+1, code, d.Status, d.Addr)
		}
	}
	if code, _ := send("10.1.2.3:40000", "10.9.9.9, 203.0.113.7"); code != 429 {
		t.Fatalf("send(10.1.2.3, X-Forwarded-For 10.9.9.9, 203.0.113.7) request 3 = %d, want 429", code)
	}
	// A client that connects directly is itself, whatever it writes.
	if _, d := send("198.51.100.4:5000", "10.1.2.3"); d.Status != Allowed || d.Addr.String() != "198.51.100.4" {
		t.Fatalf("send(198.51.100.4, X-Forwarded-For 10.1.2.3), a direct client = %v %v, want allowed from 198.51.100.4", d.Status, d.Addr)
	}
}

// readmeCommands returns the lines of the ```sh blocks of the Markdown
// file path, each with its trailing "# comment" and spaces removed.
func readmeCommands(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	in := false
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case line == "```sh":
			in = true
		case line == "```":
			in = false
		case in:
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			cmds = append(cmds, strings.TrimSpace(line))
		}
	}
	return cmds
}

// Every example directory has a README whose commands are the example's
// own: a Go example's `go run` lines are those of its package comment
// (which its tests cover), with flags it defines, and the README names
// its default listen address; the files the proxies' commands name are
// shipped; the Express and FastAPI apps' plans file is shipped beside
// them and holds every plan their API keys name.
func TestExampleReadmes(t *testing.T) {
	dirs, err := os.ReadDir("examples")
	if err != nil {
		t.Fatal(err)
	}
	flagRe := regexp.MustCompile(`flag\.\w+\("(\w+)", "?([^",]*)`)
	for _, dir := range dirs {
		if !dir.IsDir() {
			continue
		}
		name := dir.Name()
		readme := filepath.Join("examples", name, "README.md")
		if _, err := os.Stat(readme); err != nil {
			t.Errorf("examples/%s: %v, want a README with its command", name, err)
			continue
		}
		cmds := readmeCommands(t, readme)
		if len(cmds) == 0 {
			t.Errorf("%s = no ```sh block, want its command", readme)
		}
		src, err := os.ReadFile(filepath.Join("examples", name, "main.go"))
		if err != nil || name == "fastapi" {
			continue // not a Go example
		}
		doc, _, _ := strings.Cut(string(src), "\npackage main")
		flags := map[string]string{}
		for _, m := range flagRe.FindAllStringSubmatch(string(src), -1) {
			flags[m[1]] = m[2]
		}
		for _, c := range cmds {
			cmd, _, _ := strings.Cut(c, " #")
			if !strings.HasPrefix(cmd, "go run ") {
				continue
			}
			if !strings.Contains(doc, "//\t"+cmd) {
				t.Errorf("%s command %q is not in main.go's package comment, want the same commands in both", readme, cmd)
			}
			for _, f := range strings.Fields(cmd) {
				if f, ok := strings.CutPrefix(f, "-"); ok {
					if _, defined := flags[f]; !defined {
						t.Errorf("%s command %q: main.go defines no flag -%s", readme, cmd, f)
					}
				}
			}
		}
		text, _ := os.ReadFile(readme)
		if addr, ok := flags["addr"]; ok && !strings.Contains(string(text), "`"+addr+"`") {
			t.Errorf("%s does not name its default listen address `%s` (-addr)", readme, addr)
		}
	}

	// Every file the proxies' commands name is shipped.
	pathRe := regexp.MustCompile(`examples/proxies/[\w./-]+`)
	for _, c := range readmeCommands(t, filepath.Join("examples", "proxies", "README.md")) {
		for _, path := range pathRe.FindAllString(c, -1) {
			if _, err := os.Stat(path); err != nil {
				t.Errorf("examples/proxies/README.md command %q: %v, want the file it names shipped", c, err)
			}
		}
	}

	// The plans the apps' API keys name are in the plans file beside them.
	planRe := map[string]*regexp.Regexp{
		"express/app.js":  regexp.MustCompile(`plan: "(\w+)"`),
		"fastapi/main.py": regexp.MustCompile(`": \("\w+", "(\w+)"\),`),
	}
	for file, re := range planRe {
		src, err := os.ReadFile(filepath.Join("examples", file))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(file)
		b, err := os.ReadFile(filepath.Join("examples", dir, "plans.json"))
		if err != nil {
			t.Errorf("examples/%s: %v, want the plans file its API keys name", dir, err)
			continue
		}
		var plans map[string]json.RawMessage
		if err := json.Unmarshal(b, &plans); err != nil {
			t.Fatalf("examples/%s/plans.json: %v", dir, err)
		}
		named := re.FindAllStringSubmatch(string(src), -1)
		if len(named) == 0 {
			t.Fatalf("examples/%s = no API key naming a plan where the test expects them", file)
		}
		for _, m := range named {
			if _, ok := plans[m[1]]; !ok {
				t.Errorf("examples/%s/plans.json = no plan %q, which %s's API keys name", dir, m[1], file)
			}
		}
		if !slices.Contains(readmeCommands(t, filepath.Join("examples", dir, "README.md")), "HTTP_PROTECT_PLANS=plans.json go run ../../cmd/protectd &") {
			t.Errorf("examples/%s/README.md = no protectd command with HTTP_PROTECT_PLANS=plans.json", dir)
		}
	}
}

// The README's commands are the ones that work: `go mod tidy` follows
// the -replace (without it the build fails, protect replaced but not
// required), and each `go run ./examples/X` line is one of that
// example's own, from its package comment.
func TestReadmeCommands(t *testing.T) {
	cmds := readmeCommands(t, "README.md")
	replace := slices.Index(cmds, "go mod edit -replace github.com/httpprotect/protect=../protect")
	if replace < 0 || replace+1 >= len(cmds) || cmds[replace+1] != "go mod tidy" {
		t.Errorf("README.md commands = %q, want go mod tidy right after go mod edit -replace", cmds)
	}
	examples := 0
	for _, c := range cmds {
		rest, ok := strings.CutPrefix(c, "go run ./examples/")
		if !ok {
			continue
		}
		examples++
		name, _, _ := strings.Cut(rest, " ")
		src, err := os.ReadFile(filepath.Join("examples", name, "main.go"))
		if err != nil {
			t.Errorf("README.md command %q: %v", c, err)
			continue
		}
		if doc, _, _ := strings.Cut(string(src), "\npackage main"); !strings.Contains(doc, "//\t"+c) {
			t.Errorf("README.md command %q is not in examples/%s/main.go's package comment, want one of its own", c, name)
		}
	}
	if examples < 2 {
		t.Errorf("README.md = %d go run ./examples/ commands, want basic's and cluster's", examples)
	}
}
