package redistest

import (
	"strconv"
	"testing"
	"time"
)

// StartReplica starts a Server of the test's own that replicates
// master, and waits until it is in sync: a master with a replica, for
// the tests of WAIT.
func StartReplica(t testing.TB, master *Server) *Server {
	t.Helper()
	r := StartServer(t, false, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	Eventually(t, 30*time.Second, "the replica "+r.Addr+" in sync", r.InSync)
	return r
}

// InSync returns an error while the server is a replica whose link to
// its master is not up, or does not answer; nil for a master.
func (s *Server) InSync() error { return inSync(s) }
