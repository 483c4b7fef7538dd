package protect

import "github.com/httpprotect/protect/store"

// remoteStore is a store as a third party writes one, which Protector
// tests use to run the path of every store outside the process: the
// memory store behind nothing but the Store and Space interfaces, so that
// the Protector finds none of the optional capabilities and guards it
// (deadline, circuit breaker, failure policy) as it would a database.
type remoteStore struct{ *MemoryStore }

// Space hides what the memory store's space offers beyond Space.
func (s remoteStore) Space(sc store.Scope) (store.Space, error) {
	sp, err := s.MemoryStore.Space(sc)
	if err != nil {
		return nil, err
	}
	return struct{ store.Space }{sp}, nil
}
