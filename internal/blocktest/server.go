package blocktest

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A Server is a block list served over HTTP that can be made slow: while
// Slow is set, each GET answers 200 and then trickles a newline every
// 10ms, without end, until Release or until the client gives up; then
// the list. It is what a list server that hangs mid-answer looks like.
type Server struct {
	*httptest.Server
	Gets    atomic.Int32  // GETs received
	Slow    atomic.Bool   // trickle the answers that start from now
	Started chan struct{} // a value per trickle started
	body    atomic.Value  // string
	release chan struct{}
}

// NewServer serves body until SetBody; it is closed, and every trickle
// released, in t.Cleanup.
func NewServer(t *testing.T, body string) *Server {
	t.Helper()
	s := &Server{Started: make(chan struct{}, 16), release: make(chan struct{})}
	s.body.Store(body)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Gets.Add(1)
		if s.Slow.Load() {
			s.Started <- struct{}{}
			w.WriteHeader(http.StatusOK)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
		trickle:
			for {
				w.Write([]byte("\n"))
				w.(http.Flusher).Flush()
				select {
				case <-s.release:
					break trickle
				case <-r.Context().Done():
					return
				case <-tick.C:
				}
			}
		}
		w.Write([]byte(s.body.Load().(string)))
	}))
	t.Cleanup(func() {
		s.Release()
		s.Close()
	})
	return s
}

// SetBody makes body the list from the next answer on.
func (s *Server) SetBody(body string) { s.body.Store(body) }

// Release ends every trickle, running and to come: each then sends the
// list. A second call changes nothing.
func (s *Server) Release() {
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}
