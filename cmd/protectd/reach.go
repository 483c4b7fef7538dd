package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/httpprotect/protect"
)

// reachTimeout bounds the round trip that checks the store at start.
const reachTimeout = 2 * time.Second

// reachStore says what store protectd decides on, having asked it to
// answer when it can be asked (a store with a Ping method, as
// redisstore's): "redis at 127.0.0.1:6379, answered in 210µs". The
// memory store needs no asking; on a state file (stateFile, the
// HTTP_PROTECT_STATE_FILE setting) it is "memory, state file PATH". err
// says in one sentence why a store did not answer, naming where it was
// asked: "redis at 127.0.0.1:6379 does not answer: connection refused".
func reachStore(ctx context.Context, store protect.Store, stateFile string) (what string, err error) {
	if store == nil {
		return "memory, in this process: bans and counters are this process's alone", nil
	}
	if _, ok := store.(*protect.MemoryStore); ok && stateFile != "" {
		return "memory, state file " + stateFile, nil
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
		return what, unanswered(what, err)
	}
	return fmt.Sprintf("%s, answered in %v", what, time.Since(start).Round(time.Microsecond)), nil
}

// notAnswered is the error of a store that did not answer: one sentence,
// wrapping the store's own error.
type notAnswered struct {
	msg string
	err error
}

func (e *notAnswered) Error() string { return e.msg }
func (e *notAnswered) Unwrap() error { return e.err }

// unanswered says that the store what did not answer, once: the store's
// error ("protect: redis at A does not answer: connection refused at A")
// names it already, and its cause may name the address again.
func unanswered(what string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "protect: ")
	if addr, ok := strings.CutPrefix(what, "redis at "); ok {
		msg = strings.TrimSuffix(msg, " at "+addr)
	}
	if !strings.HasPrefix(msg, what) {
		msg = what + " does not answer: " + msg
	}
	return &notAnswered{msg: msg, err: err}
}
