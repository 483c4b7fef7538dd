// Command protectd is protect as a decision service, for services written
// in any language: nginx (auth_request), Traefik (ForwardAuth), Caddy
// (forward_auth) and Envoy (ext_authz, HTTP service) ask it about each
// request before they pass the request on.
//
//	HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1 protectd
//
// It answers:
//
//	/verify    any method: 200 with the RateLimit fields when the request
//	           may pass; the refusal's status, Retry-After and a
//	           problem+json body when not. Paths below /verify/ are the
//	           same (Envoy appends the original path).
//	/healthz   GET: 200 while the process serves.
//	/metrics   GET: Prometheus metrics (package metrics, and Go's).
//
// The settings are the HTTP_PROTECT_* environment that protect.ConfigFromEnv
// reads (the memory store by default, Redis with HTTP_PROTECT_REDIS_URL),
// plus HTTP_PROTECT_LISTEN [127.0.0.1:8089] and HTTP_PROTECT_PLANS: a plans
// file (JSON, see protect.ParsePlans), or the JSON itself when the value
// starts with "{". A bad setting exits 2 with the setting quoted; a
// listener that cannot be opened exits 1. SIGTERM and SIGINT shut it down
// gracefully. Logs, one JSON line each (one per refusal), go to stderr.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
