package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// protectdBinary builds protectd, without the race detector or any
// test flag, so that what a test measures of it is protectd's alone.
// Without a go command the test skips, and fails under CI=true.
func protectdBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no go command to build protectd: %v", err)
		}
		t.Skipf("no go command to build protectd: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "protectd")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build protectd: %v\n%s", err, out)
	}
	return bin
}

// child is a protectd process.
type child struct {
	cmd   *exec.Cmd
	log   *logBuffer        // its stderr
	addrs map[string]string // the addr of each listening log line, by msg
}

// startChild runs protectd with env (and the environment's other
// variables) in a process of its own, and waits until the log lines of
// msgs have all been written. It is stopped in t.Cleanup.
func startChild(t *testing.T, msgs []string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(protectdBinary(t))
	cmd.Env = append(append(os.Environ(), envListen+"=127.0.0.1:0"), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	c := &child{cmd: cmd, log: &logBuffer{}}
	found := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		log := c.log
		addrs := map[string]string{}
		waiting := true
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			var m map[string]any
			if !waiting || json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			if msg, _ := m["msg"].(string); msg != "" {
				if a, ok := m["addr"].(string); ok {
					addrs[msg] = a
				}
			}
			if hasAll(addrs, msgs) {
				c.addrs = addrs // read only once found is received
				found <- nil
				waiting = false
			}
		}
		if waiting {
			found <- fmt.Errorf("protectd ended before it listened; log:\n%s", log.String())
		}
	}()
	select {
	case err := <-found:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("protectd child: no %q log lines after 30s", msgs)
	}
	return c
}

func hasAll(m map[string]string, keys []string) bool {
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

// peakRSS is the child's peak resident set so far, in bytes (VmHWM).
func (c *child) peakRSS(t *testing.T) int64 {
	t.Helper()
	return c.status(t, "VmHWM:")
}

// rss is the child's resident set now, in bytes (VmRSS).
func (c *child) rss(t *testing.T) int64 {
	t.Helper()
	return c.status(t, "VmRSS:")
}

func (c *child) status(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status %s %q: %v", c.cmd.Process.Pid, field, v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status has no %s", c.cmd.Process.Pid, field)
	return 0
}
