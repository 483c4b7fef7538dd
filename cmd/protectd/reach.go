package main

import (
	"context"
	"fmt"
	"time"

	"github.com/httpprotect/protect"
)

// reachTimeout bounds the round trip that checks the store at start.
const reachTimeout = 2 * time.Second

// reachStore says what store protectd decides on, having asked it to
// answer when it can be asked (a store with a Ping method, as
// redisstore's): "redis at 127.0.0.1:6379, answered in 210µs". The
// memory store needs no asking. err says why a store did not answer,
// naming where it was asked.
func reachStore(ctx context.Context, store protect.Store) (what string, err error) {
	if store == nil {
		return "memory, in this process: bans and counters are this process's alone", nil
	}
	what = fmt.Sprintf("%T", store)
	if a, ok := store.(interface{ Addr() string }); ok {
		what = "redis at " + a.Addr()
	}
	p, ok := store.(interface{ Ping(context.Context) error })
	if !ok {
		return what, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	start := time.Now()
	if err := p.Ping(ctx); err != nil {
		return what, fmt.Errorf("%s did not answer: %w", what, err)
	}
	return fmt.Sprintf("%s, answered in %v", what, time.Since(start).Round(time.Microsecond)), nil
}
