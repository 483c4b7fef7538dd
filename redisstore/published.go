package redisstore

import (
	"context"
	"fmt"
	"time"

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

// limitsKey is where a namespace's limits are published.
func limitsKey(ns string) string { return ns + "limits" }

// Publish implements Space: one SET of <namespace>limits, with a TTL of
// publishedTTL; the store writes it again every republishEvery while its
// refresher runs (Options.RangeRefresh not negative).
func (sp *redisSpace) Publish(ctx context.Context) error {
	s, rec := sp.s, encodeLimits(sp.lim)
	if err := s.client.Set(ctx, limitsKey(sp.ns), rec, publishedTTL).Err(); err != nil {
		return fmt.Errorf("protect: redis publish limits of %q: %w", sp.ns, err)
	}
	s.pubMu.Lock()
	if s.published == nil {
		s.published = make(map[string]string)
	}
	s.published[sp.ns] = rec
	s.pubMu.Unlock()
	return nil
}

// republish writes again, once every republishEvery by the store's
// clock, the limits this store's spaces published: one pipelined round
// trip for every namespace. The refresher calls it on every tick.
func (s *Store) republish(ctx context.Context) error {
	s.pubMu.Lock()
	now := s.now()
	if len(s.published) == 0 || (s.republished != 0 && now-s.republished < int64(republishEvery)) {
		s.pubMu.Unlock()
		return nil
	}
	s.republished = now
	recs := make(map[string]string, len(s.published))
	for ns, rec := range s.published {
		recs[ns] = rec
	}
	s.pubMu.Unlock()
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for ns, rec := range recs {
			p.Set(ctx, limitsKey(ns), rec, publishedTTL)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("protect: redis publish limits again: %w", err)
	}
	return nil
}
