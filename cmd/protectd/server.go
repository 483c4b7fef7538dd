package main

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/httpprotect/protect/metrics"
)

const verifyPath = "/verify"

// Server limits. A proxy asks with a few headers and no body, so every
// phase of a request is short: a peer that sends its headers a byte at a
// time (slowloris) is cut off after readHeaderTimeout.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 10 * time.Second
	// idleTimeout keeps the proxy's pooled connections (nginx keepalive)
	// open between requests.
	idleTimeout = 2 * time.Minute
	// maxHeaderBytes holds a client's request headers as a proxy forwards
	// them (nginx's own limit is 4 buffers of 8k by default).
	maxHeaderBytes = 64 << 10
	// shutdownTimeout is how long a shutdown waits for requests in flight.
	shutdownTimeout = 10 * time.Second
)

// newHandler routes protectd's paths. /verify and every path below it
// go to v without ServeMux's path cleaning: Envoy appends the original
// path, which may hold "//" or "..", and a redirect would reach the
// client as the answer. With the challenge on, the answer path
// (/.protect/challenge) goes to the protector's Middleware, which
// answers it, and GET /challenge serves the page (challenge.go). /metrics serves the protector's counters and the
// Go runtime's and process's, from a registry of its own.
func newHandler(v *verifier) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(v.p),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write([]byte("ok\n"))
	})
	if v.chal != nil {
		mux.HandleFunc("GET "+challengePagePath, v.servePage)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case p == verifyPath || strings.HasPrefix(p, verifyPath+"/"):
			v.ServeHTTP(w, r)
		case v.chal != nil && p == v.chal.path: // the page's answer, which the proxy passes on
			v.chal.answer.ServeHTTP(w, r)
		default:
			mux.ServeHTTP(w, r)
		}
	})
}

// newServer is an http.Server with every timeout set.
func newServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
