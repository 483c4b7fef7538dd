package redistest

import (
	"context"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Start starts a Server of one test's own (StartServer, without a
// Cluster bus port), which the test may reconfigure, flush, pause and
// restart as it could not a server other tests share.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	return StartServer(t, false, args...)
}

// Restart kills the server and starts it again on the same port, with
// the same command line: with no persistence, an empty one.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.launch()
}

// Pause stops the server's process (SIGSTOP): it holds its connections
// and answers nothing, as a hung server does, until Resume.
func (s *Server) Pause() { syscall.Kill(-s.cmd.Process.Pid, syscall.SIGSTOP) }

// Resume lets a paused server run again.
func (s *Server) Resume() { syscall.Kill(-s.cmd.Process.Pid, syscall.SIGCONT) }

// Do runs one command on the server, failing the test on an error.
func (s *Server) Do(args ...any) any {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil {
		s.t.Fatalf("redis %v: %v", args, err)
	}
	return v
}
