package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/httpprotect/protect/store"
	"github.com/redis/go-redis/v9"
)

// Published limits. A namespace's limits live at <namespace>limits, with
// a TTL: Redis may lose them (a restart without persistence, an eviction,
// a FLUSHALL), and a namespace whose services are gone must not keep them
// for ever, showing protectctl numbers nobody enforces. So a store writes
// again, every republishEvery while it runs, the limits its spaces
// published, which both puts back what Redis lost and keeps the key from
// expiring; once the last service of a namespace stops, its limits expire
// within publishedTTL.
const (
	// publishedTTL is how long published limits outlive the last store
	// that writes them again.
	publishedTTL = 10 * time.Minute
	// republishEvery is how soon limits that Redis lost are back.
	republishEvery = 10 * time.Second
)

// publisher writes a store's published limits, and writes them again.
type publisher struct {
	client redis.UniversalClient

	mu          sync.Mutex        // guards published and republished
	published   map[string]string // namespace → the limits its spaces published here, encoded
	republished int64             // ticks: when published was last written again
}

// limitsKey is where a namespace's limits are published.
func limitsKey(ns string) string { return ns + "limits" }

// Publish implements Space: one SET of <namespace>limits, with a TTL of
// publishedTTL; the store writes it again every republishEvery while its
// refresher runs (Options.RangeRefresh not negative).
func (sp *redisSpace) Publish(ctx context.Context) error {
	return sp.s.pub.publish(ctx, sp.ns, encodeLimits(sp.lim))
}

// publish writes rec, the encoded limits of namespace ns, and keeps it
// to write again.
func (p *publisher) publish(ctx context.Context, ns, rec string) error {
	if err := p.client.Set(ctx, limitsKey(ns), rec, publishedTTL).Err(); err != nil {
		return fmt.Errorf("protect: redis publish limits of %q: %w", ns, err)
	}
	p.mu.Lock()
	if p.published == nil {
		p.published = make(map[string]string)
	}
	p.published[ns] = rec
	p.mu.Unlock()
	return nil
}

// republish writes again, once every republishEvery by the store's
// clock (now, in ticks), the limits this store's spaces published: one
// pipelined round trip for every namespace. The refresher calls it on
// every tick.
func (p *publisher) republish(ctx context.Context, now func() int64) error {
	p.mu.Lock()
	t := now()
	if len(p.published) == 0 || (p.republished != 0 && t-p.republished < int64(republishEvery)) {
		p.mu.Unlock()
		return nil
	}
	p.republished = t
	recs := make(map[string]string, len(p.published))
	for ns, rec := range p.published {
		recs[ns] = rec
	}
	p.mu.Unlock()
	_, err := p.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for ns, rec := range recs {
			pipe.Set(ctx, limitsKey(ns), rec, publishedTTL)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("protect: redis publish limits again: %w", err)
	}
	return nil
}

// Published implements Store.
func (s *Store) Published(ctx context.Context, namespace string) (store.Limits, bool, error) {
	return s.pub.read(ctx, namespace)
}

// read returns the limits published for namespace, and whether there are
// any.
func (p *publisher) read(ctx context.Context, namespace string) (store.Limits, bool, error) {
	if strings.ContainsAny(namespace, "{}") {
		return store.Limits{}, false, fmt.Errorf("protect: redis store: namespace %q must not contain { or }", namespace)
	}
	v, err := p.client.Get(ctx, limitsKey(namespace)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return store.Limits{}, false, nil
	case err != nil:
		return store.Limits{}, false, fmt.Errorf("protect: redis published limits of %q: %w", namespace, err)
	}
	lim, err := decodeLimits(v)
	if err != nil {
		return store.Limits{}, false, fmt.Errorf("protect: redis published limits of %q: %w", namespace, err)
	}
	return lim, true, nil
}
