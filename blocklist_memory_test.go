package protect_test

import (
	"bufio"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/httpprotect/protect"
)

// listMemoryBound is the peak heap, above what was in use before, that
// loading a generated list of 4M IPv4 addresses (56 MiB) from a URL may
// reach; docs/blocklists.md states it.
const listMemoryBound = 768 << 20

// A large URL list is parsed as it comes, never held whole: the peak
// heap of its load, sampled every millisecond, stays under
// listMemoryBound.
func TestBlockListLoadMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("loads 56 MiB; its heap is measured without -short and -race")
	}
	const n = 4 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bw := bufio.NewWriter(w)
		for i := range n {
			x := uint32(i)*2654435761 | 1<<24 // spread over 1.0.0.0 and up
			fmt.Fprintf(bw, "%d.%d.%d.%d\n", 1+x>>24%223, x>>16&255, x>>8&255, x&255)
		}
		bw.Flush()
	}))
	t.Cleanup(srv.Close)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	stop, peak := make(chan struct{}), make(chan uint64)
	go func() {
		var top uint64
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			top = max(top, ms.HeapInuse)
			select {
			case <-stop:
				peak <- top
				return
			case <-tick.C:
			}
		}
	}()
	p, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler),
		BlockLists: []protect.BlockList{{Name: "big", URL: srv.URL, Cache: t.TempDir() + "/big.cache"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	err = p.ReloadBlockLists(t.Context())
	close(stop)
	got := <-peak - base
	if err != nil {
		t.Fatal(err)
	}
	entries := p.Stats().BlockLists[0].Entries
	t.Logf("peak heap above the start: %d MiB for %d entries", got>>20, entries)
	if entries < n*9/10 {
		t.Errorf("entries = %d, want about %d", entries, n)
	}
	if got > listMemoryBound {
		t.Errorf("peak heap loading %d addresses = %d MiB, want at most %d MiB", n, got>>20, listMemoryBound>>20)
	}
}
