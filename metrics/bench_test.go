package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/metrics"
)

// BenchmarkScrape measures one gather of a registry holding the collector
// of four protectors: what a scrape costs the service.
func BenchmarkScrape(b *testing.B) {
	var ps []*protect.Protector
	for _, ns := range []string{"a:", "b:", "c:", "d:"} {
		p, err := protect.New(protect.Config{Namespace: ns, Logger: quiet()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		ps = append(ps, p)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(ps...))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
