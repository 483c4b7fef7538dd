package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// logBuffer is a stderr that tests read while run writes to it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines returns the JSON log lines whose msg is msg.
func (b *logBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue // not a log line (a usage message)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// daemon is protectd run in-process.
type daemon struct {
	addr string
	log  *logBuffer
	stop func() int // shuts it down; returns run's exit code
}

// startDaemon runs protectd with env on a free loopback port and waits
// until it listens. It is stopped in t.Cleanup unless stopped before.
func startDaemon(t *testing.T, env ...string) *daemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &daemon{log: &logBuffer{}}
	done := make(chan int, 1)
	env = append([]string{envListen + "=127.0.0.1:0"}, env...)
	go func() { done <- run(ctx, nil, env, io.Discard, d.log) }()
	var once sync.Once
	code := -1
	d.stop = func() int {
		once.Do(func() { cancel(); code = <-done })
		return code
	}
	t.Cleanup(func() { d.stop() })
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if l := d.log.lines(t, "listening"); len(l) > 0 {
			d.addr = l[0]["addr"].(string)
			return d
		}
		select {
		case c := <-done:
			done <- c // for the cleanup's stop, which reads it again
			t.Fatalf("run(env %q) = exit %d before it listened, want it listening; log:\n%s", env, c, d.log)
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("run(env %q) = no listening line after 10s, want one; log:\n%s", env, d.log)
	return nil
}

// testVerifier is protectd's handler, without a listener, logging into
// the returned buffer.
func testVerifier(t testing.TB, env ...string) (http.Handler, *logBuffer) {
	t.Helper()
	s, err := loadSettings(env)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	v, err := newVerifier(s, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.p.Close() })
	return newHandler(v), logs
}

// ask sends one request to h from peer with the given headers.
func ask(h http.Handler, method, target, peer string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = peer
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}
