package metrics_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/metrics"
)

// Each block list reports its entries, its failed checks, whether it is
// up and the age of its set, read from the injected clock.
func TestBlockListSeries(t *testing.T) {
	clk := newFakeClock()
	path := filepath.Join(t.TempDir(), "list.txt")
	if err := os.WriteFile(path, []byte("192.0.2.7\n198.51.100.0/24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newProtector(t, protect.Config{Namespace: "api:", Clock: clk.Now,
		BlockLists: []protect.BlockList{{Name: "mine", Path: path}}})
	clk.Advance(90 * time.Second)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := p.ReloadBlockLists(t.Context()); err == nil {
		t.Fatal("ReloadBlockLists of a removed file = nil, want an error")
	}
	c := metrics.NewCollector(p)
	compare(t, c,
		series("protect_blocklist_entries", "gauge", `protect_blocklist_entries{list="mine",namespace="api:"} 2`)+
			series("protect_blocklist_errors_total", "counter", `protect_blocklist_errors_total{list="mine",namespace="api:"} 1`)+
			series("protect_blocklist_age_seconds", "gauge", `protect_blocklist_age_seconds{list="mine",namespace="api:"} 90`)+
			series("protect_blocklist_up", "gauge", `protect_blocklist_up{list="mine",namespace="api:"} 0`),
		"protect_blocklist_entries", "protect_blocklist_errors_total", "protect_blocklist_age_seconds", "protect_blocklist_up")
}
