package redistest

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Server is a redis-server of one test's own, on a free loopback port,
// without persistence, which the test may reconfigure, flush and restart
// as it could not a server other tests share. It is stopped, by its
// process, in t.Cleanup.
type Server struct {
	Addr string
	t    testing.TB
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
}

// Start starts a Server. Where redis-server is not installed it skips the
// test, and fails it under CI, which installs it.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		RealAddr(t) // fails under CI, skips elsewhere
		t.Skip("redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), t: t, bin: bin, port: port, dir: t.TempDir()}
	s.start(args)
	t.Cleanup(s.stop)
	return s
}

func (s *Server) start(args []string) {
	s.t.Helper()
	all := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(s.port), "--save", "", "--appendonly", "no", "--dir", s.dir}, args...)
	s.cmd = exec.Command(s.bin, all...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	for i := 0; c.Ping(context.Background()).Err() != nil; i++ {
		if i == 250 {
			s.t.Fatalf("redis-server on %s did not start", s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) stop() {
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGCONT) // a paused server dies all the same
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

// Restart kills the server and starts a new one on the same port: with no
// persistence, an empty one.
func (s *Server) Restart() {
	s.t.Helper()
	s.stop()
	s.start(nil)
}

// Pause stops the server's process (SIGSTOP): it holds its connections
// and answers nothing, as a hung server does, until Resume.
func (s *Server) Pause() { s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume lets a paused server run again.
func (s *Server) Resume() { s.cmd.Process.Signal(syscall.SIGCONT) }

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
