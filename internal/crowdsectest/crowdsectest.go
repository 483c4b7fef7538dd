// Package crowdsectest starts a real CrowdSec Local API for tests: the
// crowdsec and cscli of Debian's package, unpacked into
// PROTECT_CROWDSEC_DIR (.ci/parts/40-crowdsec.sh), run on a free loopback
// port with a configuration of its own (no Central API, no acquisition),
// and stopped by its PID when the test ends.
package crowdsectest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/needs"
)

// A LAPI is a running crowdsec with one machine registered, so that
// cscli can add decisions.
type LAPI struct {
	URL  string // http://127.0.0.1:PORT
	dir  string // the unpacked package
	conf string // its config.yaml
	cmd  *exec.Cmd
	log  *bytes.Buffer
	mu   sync.Mutex
}

var (
	shared     *LAPI
	sharedErr  error
	sharedOnce sync.Once
	bouncers   atomic.Int32
)

// Dir returns PROTECT_CROWDSEC_DIR; without it the test skips, and under
// CI fails.
func Dir(t testing.TB) string {
	t.Helper()
	return needs.Env(t, "PROTECT_CROWDSEC_DIR", "where crowdsec is unpacked; .ci/parts/40-crowdsec.sh unpacks it")
}

// Shared returns the LAPI of the test binary, started by its first
// caller and stopped by StopShared, which the package's TestMain calls.
// Tests that stop a LAPI use Start.
func Shared(t testing.TB) *LAPI {
	t.Helper()
	dir := Dir(t)
	sharedOnce.Do(func() { shared, sharedErr = start(dir, os.TempDir()) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// StopShared stops the shared LAPI if one was started; TestMain calls it.
func StopShared() {
	if shared != nil {
		shared.Stop()
		os.RemoveAll(filepath.Dir(shared.conf))
	}
}

// Start starts a LAPI of the test's own, stopped at the test's end.
func Start(t testing.TB) *LAPI {
	t.Helper()
	dir := Dir(t)
	l, err := start(dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l
}

func start(dir, tmp string) (*LAPI, error) {
	work, err := os.MkdirTemp(tmp, "crowdsec")
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"data", "hub", "cfg"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			return nil, err
		}
	}
	for _, f := range []string{"profiles.yaml", "simulation.yaml"} {
		b, err := os.ReadFile(filepath.Join(dir, "etc/crowdsec", f))
		if err != nil {
			return nil, fmt.Errorf("crowdsectest: %w", err)
		}
		if err := os.WriteFile(filepath.Join(work, "cfg", f), b, 0o644); err != nil {
			return nil, err
		}
	}
	os.WriteFile(filepath.Join(work, "cfg", "acquis.yaml"), nil, 0o644)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	conf := filepath.Join(work, "config.yaml")
	// No online_client: the LAPI never calls the Central API.
	yaml := strings.NewReplacer("$W", work, "$ADDR", addr).Replace(`common:
  daemonize: false
  log_media: stdout
  log_level: warning
  working_dir: $W
config_paths:
  config_dir: $W/cfg/
  data_dir: $W/data/
  simulation_path: $W/cfg/simulation.yaml
  hub_dir: $W/hub/
  index_path: $W/hub/.index.json
  notification_dir: $W/cfg/notifications/
  plugin_dir: $W/plugins/
crowdsec_service:
  acquisition_path: $W/cfg/acquis.yaml
cscli:
  output: human
db_config:
  log_level: warning
  type: sqlite
  use_wal: true
  db_path: $W/data/crowdsec.db
api:
  client:
    credentials_path: $W/creds.yaml
  server:
    log_level: warning
    listen_uri: $ADDR
    profiles_path: $W/cfg/profiles.yaml
    trusted_ips: [127.0.0.1]
prometheus:
  enabled: false
`)
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		return nil, err
	}
	l := &LAPI{URL: "http://" + addr, dir: dir, conf: conf, log: &bytes.Buffer{}}
	if err := l.run(); err != nil {
		return nil, err
	}
	if _, err := l.cscli("machines", "add", "protect-test", "--auto", "-f", filepath.Join(work, "creds.yaml"), "--url", l.URL); err != nil {
		l.Stop()
		return nil, err
	}
	return l, nil
}

// run starts crowdsec and waits until its LAPI answers.
func (l *LAPI) run() error {
	cmd := exec.Command(filepath.Join(l.dir, "usr/bin/crowdsec"), "-c", l.conf, "-no-cs", "-no-capi")
	cmd.Dir = filepath.Dir(l.conf)
	cmd.SysProcAttr = procAttr()
	cmd.Stdout, cmd.Stderr = &syncWriter{l: l}, &syncWriter{l: l}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("crowdsectest: %w", err)
	}
	l.cmd = cmd
	for range 300 {
		c, err := net.Dial("tcp", strings.TrimPrefix(l.URL, "http://"))
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.Stop()
	return fmt.Errorf("crowdsectest: the LAPI did not answer on %s: %s", l.URL, l.Log())
}

type syncWriter struct{ l *LAPI }

func (w *syncWriter) Write(b []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	return w.l.log.Write(b)
}

// Log returns what crowdsec wrote so far.
func (l *LAPI) Log() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.log.String()
}

// Stop stops crowdsec by its PID and waits for it.
func (l *LAPI) Stop() {
	if l.cmd == nil {
		return
	}
	l.cmd.Process.Kill()
	l.cmd.Wait()
	l.cmd = nil
}

// Restart starts crowdsec again on the same port and database.
func (l *LAPI) Restart(t testing.TB) {
	t.Helper()
	if err := l.run(); err != nil {
		t.Fatal(err)
	}
}

// Cscli runs cscli against this LAPI and returns its output.
func (l *LAPI) Cscli(t testing.TB, args ...string) string {
	t.Helper()
	out, err := l.cscli(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (l *LAPI) cscli(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(l.dir, "usr/bin/cscli"), append([]string{"-c", l.conf}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("crowdsectest: cscli %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Bouncer registers a new bouncer and returns its key.
func (l *LAPI) Bouncer(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("protect-test-%d-%d", os.Getpid(), bouncers.Add(1))
	return strings.TrimSpace(l.Cscli(t, "bouncers", "add", name, "-o", "raw"))
}

// Machine registers a new machine, validated, and returns its id and
// password, for a client that logs in as one (POST /v1/watchers/login).
func (l *LAPI) Machine(t testing.TB) (id, password string) {
	t.Helper()
	n := bouncers.Add(1)
	id = fmt.Sprintf("protect-machine-%d-%d", os.Getpid(), n)
	password = fmt.Sprintf("pw-%d-%d-%d", os.Getpid(), n, time.Now().UnixNano())
	l.Cscli(t, "machines", "add", id, "--password", password, "-f", "/dev/null")
	return id, password
}

// A Decision is one decision of cscli decisions list -o json.
type Decision struct {
	Origin   string `json:"origin"`
	Type     string `json:"type"`
	Scope    string `json:"scope"`
	Value    string `json:"value"`
	Duration string `json:"duration"`
	Scenario string `json:"scenario"`
}

// Decisions returns the decisions in force, as cscli decisions list
// shows them, in its order.
func (l *LAPI) Decisions(t testing.TB) []Decision {
	t.Helper()
	out := l.Cscli(t, "decisions", "list", "-a", "-o", "json")
	var alerts []struct {
		Decisions []Decision `json:"decisions"`
	}
	if err := json.Unmarshal([]byte(out), &alerts); err != nil {
		t.Fatalf("cscli decisions list -o json = %q: %v", out, err)
	}
	var ds []Decision
	for _, a := range alerts {
		ds = append(ds, a.Decisions...)
	}
	return ds
}
