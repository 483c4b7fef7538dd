//go:build linux

// Package netnstest gives a test two network namespaces of its own,
// joined by a veth pair, so that traffic between a client and a server,
// and the nftables ruleset that filters it, stay out of the host's.
package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/needs"

	"golang.org/x/sys/unix"
)

// A Pair is two namespaces joined by a veth pair: the client's holds
// ClientAddr and ClientAddr6, the server's ServerAddr and ServerAddr6,
// in 10.213.0.0/24 and fd00:213::/64. Each Pair's namespaces are its
// own, so pairs may share these addresses.
type Pair struct {
	Client, Server           string // namespace names, for ip netns exec
	ClientAddr, ServerAddr   netip.Addr
	ClientAddr6, ServerAddr6 netip.Addr
	t                        testing.TB
}

// New makes a Pair and removes it when the test ends. Where no namespace
// can be made (not root, no ip command), the test is skipped with a
// message, and fails under CI=true, where one must be.
func New(t testing.TB) *Pair {
	t.Helper()
	if os.Geteuid() != 0 {
		needs.Missing(t, "netnstest: not root (network namespaces need root)")
	}
	needs.Binary(t, "ip", "iproute2; .ci/parts/50-nftables.sh installs it")
	var b [4]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	p := &Pair{
		Client: "ptc" + id, Server: "pts" + id,
		ClientAddr: netip.MustParseAddr("10.213.0.1"), ServerAddr: netip.MustParseAddr("10.213.0.2"),
		ClientAddr6: netip.MustParseAddr("fd00:213::1"), ServerAddr6: netip.MustParseAddr("fd00:213::2"),
		t: t,
	}
	if out, err := exec.Command("ip", "netns", "add", p.Client).CombinedOutput(); err != nil {
		needs.Missing(t, fmt.Sprintf("netnstest: ip netns add: %v: %s", err, out))
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", p.Client).Run() })
	if out, err := exec.Command("ip", "netns", "add", p.Server).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", p.Server, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", p.Server).Run() })
	steps := [][]string{
		{"ip", "link", "add", "vc" + id, "netns", p.Client, "type", "veth", "peer", "name", "vs" + id, "netns", p.Server},
		// No duplicate address detection on either end: with it each
		// link-local address is tentative for a second or more, and
		// neighbour discovery waits for it.
		{"ip", "netns", "exec", p.Client, "sh", "-c", "echo 0 > /proc/sys/net/ipv6/conf/vc" + id + "/accept_dad"},
		{"ip", "netns", "exec", p.Server, "sh", "-c", "echo 0 > /proc/sys/net/ipv6/conf/vs" + id + "/accept_dad"},
		{"ip", "-n", p.Client, "addr", "add", p.ClientAddr.String() + "/24", "dev", "vc" + id},
		{"ip", "-n", p.Server, "addr", "add", p.ServerAddr.String() + "/24", "dev", "vs" + id},
		{"ip", "-n", p.Client, "addr", "add", p.ClientAddr6.String() + "/64", "dev", "vc" + id, "nodad"},
		{"ip", "-n", p.Server, "addr", "add", p.ServerAddr6.String() + "/64", "dev", "vs" + id, "nodad"},
		{"ip", "-n", p.Client, "link", "set", "vc" + id, "up"},
		{"ip", "-n", p.Server, "link", "set", "vs" + id, "up"},
		{"ip", "-n", p.Client, "link", "set", "lo", "up"},
		{"ip", "-n", p.Server, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	// Each end answers once neighbour discovery is done: a connection
	// to a closed port is then refused, not left waiting.
	for _, a := range []netip.Addr{p.ServerAddr, p.ServerAddr6} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			c, err := p.Dial(p.Client, netip.AddrPortFrom(a, 1).String(), 200*time.Millisecond)
			if c != nil {
				c.Close()
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server namespace's %v does not answer the client's within 5s: %v", a, err)
			}
		}
	}
	return p
}

// Exec runs a command in namespace ns and returns its combined output.
func (p *Pair) Exec(ns string, args ...string) ([]byte, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ip netns exec %s %s: %w: %s", ns, strings.Join(args, " "), err, out)
	}
	return out, nil
}

// Command is a command to run in namespace ns.
func (p *Pair) Command(ns string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
}

// Fd returns a descriptor of namespace ns, open until the test ends.
func (p *Pair) Fd(ns string) int {
	p.t.Helper()
	f, err := os.Open("/run/netns/" + ns)
	if err != nil {
		p.t.Fatalf("open namespace %s: %v", ns, err)
	}
	p.t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}

// In runs f on a thread moved into namespace ns: the sockets f makes
// belong to ns for their whole life.
func In(ns string, f func() error) error {
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		return err
	}
	defer target.Close()
	runtime.LockOSThread()
	home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer home.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", ns, err)
	}
	ferr := f()
	if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, so it ends with this goroutine
		// rather than serve others from the wrong namespace.
		return fmt.Errorf("setns back: %w", err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Listen listens on TCP address addr in namespace ns until the test ends.
func (p *Pair) Listen(ns, addr string) net.Listener {
	p.t.Helper()
	var ln net.Listener
	if err := In(ns, func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		p.t.Fatalf("listen on %s in %s: %v", addr, ns, err)
	}
	p.t.Cleanup(func() { ln.Close() })
	return ln
}

// Serve listens on TCP address addr in namespace ns until the test ends,
// accepting every connection and closing it at once: a server whose only
// use is to be reached (Reaches, WaitReach). It returns the address.
func (p *Pair) Serve(ns, addr string) string {
	p.t.Helper()
	ln := p.Listen(ns, addr)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// Dial connects to TCP address addr from namespace ns within timeout.
func (p *Pair) Dial(ns, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := In(ns, func() (err error) {
		c, err = net.DialTimeout("tcp", addr, timeout)
		return err
	})
	return c, err
}

// Reaches reports whether a TCP connection from the client namespace to
// addr is accepted within timeout: a timeout is false (the kernel dropped
// the packets); any other error fails the test that made p.
func (p *Pair) Reaches(addr string, timeout time.Duration) bool {
	p.t.Helper()
	c, err := p.Dial(p.Client, addr, timeout)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false
		}
		p.t.Fatalf("dial %s: %v (want a connection or a timeout)", addr, err)
	}
	c.Close()
	return true
}

// WaitReach waits until Reaches(addr, timeout) is want, for at most
// bound, and returns how long it took; what names the wait in the
// failure.
func (p *Pair) WaitReach(what, addr string, want bool, timeout, bound time.Duration) time.Duration {
	p.t.Helper()
	start := time.Now()
	for time.Since(start) < bound {
		if p.Reaches(addr, timeout) == want {
			return time.Since(start)
		}
	}
	p.t.Fatalf("%s: the client reaches %s = %v after %v, want %v", what, addr, !want, bound, want)
	return 0
}
