package protect

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A list whose server trickles its answer without end is cut at its
// deadline (listTimeout; shortened here), and keeps its last good set.
func TestBlockListDeadline(t *testing.T) {
	var slow atomic.Bool
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slow.Load() {
			w.Write([]byte("192.0.2.1\n"))
			return
		}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			w.Write([]byte("\n"))
			w.(http.Flusher).Flush()
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	}))
	t.Cleanup(func() { close(stop); srv.Close() })
	p, err := New(Config{Logger: slog.New(slog.DiscardHandler), BlockLists: []BlockList{{Name: "slow", URL: srv.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.ReloadBlockLists(t.Context()); err != nil {
		t.Fatal(err)
	}
	own := p.lists.lists[0].own
	own.mu.Lock()
	own.timeout = 200 * time.Millisecond
	slow.Store(true)
	own.mu.Unlock()
	err = p.ReloadBlockLists(t.Context())
	want := fmt.Sprintf(`protect: block list "slow" (%s): GET %s: context deadline exceeded`, srv.URL, srv.URL)
	if fmt.Sprint(err) != want {
		t.Errorf("ReloadBlockLists() of a list trickled without end = %v, want %s", err, want)
	}
	if st := p.Stats().BlockLists[0]; st.Entries != 1 || st.Errors != 1 || st.Up {
		t.Errorf("Stats().BlockLists[0] = %+v, want 1 entry, 1 error, down", st)
	}
}
