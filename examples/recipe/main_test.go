package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/needs"
)

const recipes = "../../docs/recipes.md"

// block is one fenced block of docs/recipes.md.
type block struct{ lang, text string }

// docBlocks returns the fenced blocks of docs/recipes.md, in order.
func docBlocks(t *testing.T) []block {
	t.Helper()
	b, err := os.ReadFile(recipes)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []block
	var cur *block
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimPrefix(line, "```")}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	return blocks
}

// The page's code is this example's: every Go block is in main.go, the
// JSON block is plans.json and the nginx block is nginx.conf.
func TestRecipeCodeInDoc(t *testing.T) {
	files := map[string]string{}
	for _, name := range []string{"main.go", "plans.json", "nginx.conf"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	counts := map[string]int{}
	for _, b := range docBlocks(t) {
		counts[b.lang]++
		switch b.lang {
		case "go":
			if !strings.Contains(files["main.go"], b.text) {
				t.Errorf("%s Go block is not in main.go, want it copied from there:\n%s", recipes, b.text)
			}
		case "json":
			if b.text != files["plans.json"] {
				t.Errorf("%s JSON block = \n%s\nwant plans.json:\n%s", recipes, b.text, files["plans.json"])
			}
		case "nginx":
			if b.text != files["nginx.conf"] {
				t.Errorf("%s nginx block = \n%s\nwant nginx.conf:\n%s", recipes, b.text, files["nginx.conf"])
			}
		}
	}
	if counts["go"] < 3 || counts["json"] != 1 || counts["nginx"] != 1 {
		t.Errorf("%s blocks = %v, want Go blocks, one JSON and one nginx", recipes, counts)
	}
}

// freeAddrs returns n distinct loopback addresses nothing listens on
// (yet): all are held open until the last is found.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}

// startBackground runs line (a command of the page that ends in " &") in
// a process group of its own from the repository's root, waits until
// addr answers, and stops the group in t.Cleanup.
func startBackground(t *testing.T, line, addr string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command("bash", "-c", "exec "+strings.TrimSuffix(line, " &"))
	cmd.Dir = "../.."
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) // the group is ours
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	// go run builds first: on a busy machine that takes a while.
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("%q exited before %s answered, want it serving: %s", line, addr, out.String())
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("%q: %s not answering after 3m, want it serving: %s", line, addr, out.String())
}

// varying matches what changes from run to run in protectctl's tables:
// times, durations, and the spaces that align them.
var varying = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ|\b(\d+h)?(\d+m)?\d+(\.\d+)?s\b| +`)

func normalize(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return varying.ReplaceAllStringFunc(strings.Join(lines, "\n"), func(m string) string {
		if strings.TrimSpace(m) == "" {
			return " "
		}
		return "~"
	})
}

// TestRecipeCommands runs the page's shell commands as written, their
// ports moved to free ones: Redis, the service and nginx in the
// background, then each block of curl and protectctl, whose output must
// be the text block that follows it.
func TestRecipeCommands(t *testing.T) {
	for _, bin := range []struct{ name, why string }{
		{"redis-server", ".ci/parts/10-redis.sh installs it"},
		{"nginx", ".ci/parts/20-nginx.sh installs it"},
		{"curl", "the page's requests are curl's"},
	} {
		needs.Binary(t, bin.name, bin.why)
	}
	addrs := freeAddrs(t, 3)
	redis, service, nginx := addrs[0], addrs[1], addrs[2]
	_, redisPort, _ := strings.Cut(redis, ":")
	dir := t.TempDir()
	conf, err := os.ReadFile("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	moved := strings.NewReplacer("listen 127.0.0.1:8080;", "listen "+nginx+";",
		"proxy_pass http://127.0.0.1:3000;", "proxy_pass http://"+service+";").Replace(string(conf))
	if !strings.Contains(moved, nginx) || !strings.Contains(moved, service) {
		t.Fatalf("nginx.conf = no listen 127.0.0.1:8080 or proxy_pass to 127.0.0.1:3000 where the test expects them:\n%s", conf)
	}
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	replacer := strings.NewReplacer(
		"--port 6379", "--port "+redisPort,
		"redis://127.0.0.1:6379/0", "redis://"+redis+"/0",
		"go run ./examples/recipe ", "go run ./examples/recipe -addr "+service+" ",
		"http://127.0.0.1:8080/", "http://"+nginx+"/",
		"/tmp/protect-recipe", filepath.Join(dir, "prefix"),
		`"$PWD/examples/recipe/nginx.conf"`, filepath.Join(dir, "nginx.conf"),
	)

	blocks := docBlocks(t)
	ran := 0
	for i, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		script := replacer.Replace(b.text)
		if strings.Contains(script, "127.0.0.1:8080") || strings.Contains(script, "6379") {
			t.Fatalf("%s block %d with its ports moved = %q, still holding the page's ports", recipes, i, script)
		}
		if strings.HasSuffix(strings.TrimSpace(script), " &") {
			// The servers: each line on its own, waited for.
			for line := range strings.SplitSeq(strings.TrimSpace(script), "\n") {
				switch {
				case !strings.HasSuffix(line, " &"):
					if out, err := exec.Command("bash", "-c", line).CombinedOutput(); err != nil {
						t.Fatalf("%q = %v %s, want it to succeed", line, err, out)
					}
				case strings.HasPrefix(line, "redis-server "):
					startBackground(t, line, redis)
				case strings.HasPrefix(line, "go run ./examples/recipe "):
					startBackground(t, line, service)
				case strings.HasPrefix(line, "nginx "):
					startBackground(t, line, nginx)
				default:
					t.Fatalf("%s background command %q: the test does not know what it serves", recipes, line)
				}
			}
			ran++
			continue
		}
		cmd := exec.Command("bash", "-e", "-c", script)
		cmd.Dir = "../.."
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s block %d:\n%s= %v, stderr %s; want exit 0", recipes, i, script, err, stderr.String())
		}
		ran++
		if i+1 < len(blocks) && blocks[i+1].lang == "text" {
			if got, want := normalize(string(out)), normalize(blocks[i+1].text); got != want {
				t.Errorf("%s block %d:\n%sprinted\n%s\nwant the page's\n%s", recipes, i, script, out, blocks[i+1].text)
			}
		}
	}
	if ran < 5 {
		t.Fatalf("%s = %d shell blocks run, want the servers, the requests, and protectctl's", recipes, ran)
	}
}
