package metrics_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/metrics"
	"github.com/httpprotect/protect/redisstore"
	"github.com/redis/go-redis/v9"
)

// A request that meets a ban record the store cannot read is counted in
// protect_store_malformed_total, not as a store error.
func TestMalformed(t *testing.T) {
	m := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	store := redisstore.New(rc, redisstore.Options{Logger: quiet(), RangeRefresh: -1})
	t.Cleanup(func() { store.Close(); rc.Close() })
	p := newProtector(t, protect.Config{Store: store, Namespace: "bad:", BanNamespace: "bad:", StoreTimeout: 10 * time.Second})
	m.Set("bad:{192.0.2.7}:b", "garbage")
	for range 3 {
		if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.7")); d.Status != protect.Allowed {
			t.Fatalf("VerifyAddr(192.0.2.7) = %v, want allowed", d.Status)
		}
	}
	compare(t, metrics.NewCollector(p),
		series("protect_store_malformed_total", "counter", `protect_store_malformed_total{namespace="bad:"} 3`)+
			series("protect_store_errors_total", "counter", `protect_store_errors_total{namespace="bad:"} 0`),
		"protect_store_malformed_total", "protect_store_errors_total")
}
