package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/metrics"
)

// withMetrics serves p's metrics on GET /metrics, beside app: a registry
// of its own (the default one is left alone), and outside the
// middleware, so that a scrape is never counted, limited or banned.
// Anyone who can reach /metrics reads the counters: in production, put
// it on a port of its own, or behind your own access check.
func withMetrics(p *protect.Protector, app http.Handler) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(p))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", app)
	return mux
}
