package protect

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Several protectors in one service (an address gate, a login guard, a
// consumer plan) belong on one store: one pool of connections, one
// circuit breaker, one ban list. A store passed in Config.Store is shared
// by every protector given it. A store New makes itself (from RedisURL, or
// the default memory store) is shared through Sibling, and closed when
// the last protector on it is: no registry of URLs in the process, so two
// libraries in one binary never share a pool by accident.

// ErrClosed is returned by Sibling on a protector that is closed.
var ErrClosed = errors.New("protect: protector closed")

// sharedStore is a store New made, with the number of protectors on it.
type sharedStore struct {
	store Store
	refs  atomic.Int64
}

func newSharedStore(s Store) *sharedStore {
	sh := &sharedStore{store: s}
	sh.refs.Store(1)
	return sh
}

// acquire adds a protector to the store, unless the last one has closed
// it.
func (sh *sharedStore) acquire() bool {
	for {
		n := sh.refs.Load()
		if n == 0 {
			return false
		}
		if sh.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release takes a protector off the store, closing the store with the
// last one.
func (sh *sharedStore) release() error {
	if sh.refs.Add(-1) == 0 {
		return sh.store.Close()
	}
	return nil
}

// Sibling returns a new Protector configured by cfg on p's store: the same
// pool of connections, the same circuit breaker (a dead Redis costs three
// timeouts in all, not three per protector) and the same ban list, with
// cfg's own namespace and limits. It is the way to share a store that New
// made from Config.RedisURL or the default memory store; the store is
// closed when the last protector on it is closed, in any order.
//
// cfg.Store must be nil, and cfg.RedisURL empty or p's own: a sibling
// cannot move to another store. Every other field is cfg's, defaults
// included; p's settings are not inherited (start from p.Config() to
// inherit them).
func (p *Protector) Sibling(cfg Config) (*Protector, error) {
	switch {
	case p.closed.Load():
		// Checked first: a sibling of a closed protector would otherwise
		// be made whenever another protector still holds the store.
		return nil, fmt.Errorf("protect: Sibling: %w", ErrClosed)
	case cfg.Store != nil:
		return nil, configErr("Sibling: Store must be nil: a sibling uses its protector's store")
	case cfg.RedisURL != "" && cfg.RedisURL != p.cfg.RedisURL:
		// Never quote a Redis URL: it may hold a password.
		return nil, configErr("Sibling: RedisURL: not the protector's own: a sibling cannot move to another store")
	}
	cfg.RedisURL = p.cfg.RedisURL
	if p.shared == nil { // Config.Store: its owner closes it
		cfg.Store = p.store
		return New(cfg)
	}
	if !p.shared.acquire() {
		return nil, fmt.Errorf("protect: Sibling: %w", ErrClosed)
	}
	q, err := newProtector(cfg, p.shared)
	if err != nil {
		p.shared.release()
		return nil, err
	}
	return q, nil
}
