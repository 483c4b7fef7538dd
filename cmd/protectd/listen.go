package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// unixPrefix marks a listen value that names a unix socket:
// unix:/run/protectd.sock.
const unixPrefix = "unix:"

// socketMode is the mode of a unix socket protectd creates: its owner
// and its group may connect, nobody else. Connecting to a unix socket
// takes write permission on it, so run protectd with the proxy's group
// (or put the proxy's user in protectd's) to let the proxy in. A peer on
// the socket is believed as a proxy only with
// HTTP_PROTECT_TRUST_UNIX_SOCKET=true, and then it may write
// X-Forwarded-For and name consumers: hence no access for others.
const socketMode fs.FileMode = 0o660

// unixPath returns the socket path of a listen value, if it names one.
func unixPath(v string) (string, bool) {
	return strings.CutPrefix(v, unixPrefix)
}

// checkUnixPath accepts an absolute path, which is what a proxy's
// configuration names too.
func checkUnixPath(path string) error {
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("want an absolute path after %q, such as unix:/run/protectd.sock", unixPrefix)
	}
	return nil
}

// listen opens the listener of a checked listen value: host:port for
// TCP, or unix:PATH for a unix socket of mode socketMode. A socket file
// left at PATH by a process that is gone (killed before it could remove
// it) is removed first; a socket something still answers on, or a file
// that is not a socket, is an error and is left alone. Closing the
// listener removes the socket file.
func listen(v string) (net.Listener, error) {
	return listenMode(v, socketMode)
}

// listenMode is listen with the socket file made mode (the admin API's
// socket is its owner's alone).
func listenMode(v string, mode fs.FileMode) (net.Listener, error) {
	path, ok := unixPath(v)
	if !ok {
		return net.Listen("tcp", v)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	// The socket is created under a umask that leaves at most mode, so
	// that it is never wider than mode, even for a moment, whatever the
	// umask protectd was started with; then set to mode exactly. The
	// umask is the process's: listeners are opened one after another at
	// start, before anything else creates files.
	old := syscall.Umask(int(0o777 &^ mode))
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// removeStaleSocket removes the socket at path if nothing answers on it.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket: not removed", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%s: another process listens on it", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%s: cannot tell whether it is in use: %w", path, err)
	}
	return os.Remove(path)
}
