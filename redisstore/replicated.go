package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/httpprotect/protect/store"
	"github.com/redis/go-redis/v9"
)

// Redis replicates asynchronously: a master answers a script before its
// replicas have it, and a master killed in that moment takes the counts
// it answered with it, while its promoted replica answers them again.
// With Options.WaitReplicas, each counting script is followed by WAIT
// numreplicas timeout, and the count is acknowledged only when WAIT says
// that many replicas have every write of the connection up to it.
//
// WAIT counts the writes of the connection that sends it, so it must go
// on the script's own connection, to the master of the script's slot: the
// two are one pipeline on one node's client, one round trip. A
// ClusterClient's own pipeline would not do: it sends a keyless WAIT to a
// node of its choosing, and it follows a MOVED by sending the script
// alone to the new master, away from its WAIT. So on a Cluster the pair
// goes to the client of the master that owns the key's slot
// (MasterForKey); a MOVED or ASK there is an error that the failure
// policy absorbs, and the slot map is read again (topology.failed): the
// server did not run the script. After a MOVED the next request goes
// where the map now says; an ASK, which does not change the map, is
// answered to every request for a moved key until its slot's migration
// ends.

// ErrNotReplicated is wrapped by the error of a counting call that Redis
// ran but that fewer replicas than Options.WaitReplicas acknowledged
// within Options.WaitTimeout, or whose WAIT reply was lost: the count is
// not acknowledged, and the protector's failure policy decides the
// request. The master did count it, and keeps it unless it dies before
// its replicas receive it. An answer that a ban refuses the request is
// never this error, replicated or not: a refusal admits nothing that a
// failover could count again.
var ErrNotReplicated = errors.New("not acknowledged by enough replicas")

// defaultWaitTimeout is Options.WaitTimeout's default: half the
// protector's default StoreTimeout.
const defaultWaitTimeout = 50 * time.Millisecond

// fewReplicas is the error of a WAIT that answered fewer replicas than
// asked.
type fewReplicas struct {
	got, want int64
	within    time.Duration
}

func (e *fewReplicas) Error() string {
	return fmt.Sprintf("%v: %d of %d within %v", ErrNotReplicated, e.got, e.want, e.within)
}

// Is makes a shortfall ErrNotReplicated, and protect.ErrNotAcknowledged:
// the master answered, so the store's one circuit breaker, which every
// key shares, does not count it (a lost WAIT reply, which says nothing
// of the server, is ErrNotReplicated alone).
func (e *fewReplicas) Is(target error) bool {
	return target == ErrNotReplicated || target == store.ErrNotAcknowledged
}

// redirected is a Cluster node's MOVED or ASK to a counting script sent
// with its WAIT, which the store does not follow: the node answered, so
// it is protect.ErrNotAcknowledged, no failure to the circuit breaker.
type redirected struct{ error }

func (e redirected) Unwrap() error        { return e.error }
func (e redirected) Is(target error) bool { return target == store.ErrNotAcknowledged }

// errWaitClient is the error of a counting call with WaitReplicas on a
// client whose connections the store cannot choose.
var errWaitClient = errors.New("redis store: WaitReplicas needs a *redis.Client, *redis.ClusterClient or *redis.Ring, which let the store send WAIT on the script's connection")

// waitTimeout is the timeout of the WAIT of a call under ctx: WaitTimeout,
// or half the time ctx has left when that is less, so that WAIT's own
// answer, fewer replicas, arrives before the socket's deadline would cut
// the connection; never 0, which to WAIT means forever.
func (s *Store) waitTimeout(ctx context.Context) time.Duration {
	t := s.waitFor
	if d, ok := ctx.Deadline(); ok {
		t = min(t, time.Until(d)/2)
	}
	return max(t.Truncate(time.Millisecond), time.Millisecond)
}

// canWait reports whether topology.keyNode knows c's kind of client.
func canWait(c redis.UniversalClient) bool {
	switch c.(type) {
	case *redis.Client, *redis.ClusterClient, *redis.Ring:
		return true
	}
	return false
}

// processReplicated runs the script cmd, whose first key is key, and a
// WAIT after it, in one round trip on one connection of key's server.
// cmd ends with the script's reply, or its error, or one that wraps
// ErrNotReplicated; so does the returned error. Neither command is ever
// sent twice (cmd says NoRetry for the pipeline).
func (s *Store) processReplicated(ctx context.Context, cmd onceCmd, key string) error {
	node, err := s.topo.keyNode(ctx, key)
	if err != nil {
		cmd.SetErr(err)
		return err
	}
	within := s.waitTimeout(ctx)
	wait := redis.NewIntCmd(ctx, "wait", s.waitReplicas, within.Milliseconds())
	pipe := node.Pipeline()
	pipe.Process(ctx, cmd)
	pipe.Process(ctx, wait)
	pipe.Exec(ctx) // each command holds its own reply or error
	if err := cmd.Err(); err != nil {
		if isRedirect(err) {
			err = redirected{err}
			cmd.SetErr(err)
		}
		return err // NOSCRIPT among them: Script.Run sends EVAL, with a WAIT again
	}
	switch n, err := wait.Result(); {
	case bannedReply(cmd.Val()):
		// A refusal needs no replica: what a failover could lose of it is
		// a ban, which the default mode risks too, and the protector
		// must see a ban the script wrote (to log, count and escalate it).
	case err != nil:
		err = fmt.Errorf("%w: %w", ErrNotReplicated, err)
		cmd.SetErr(err)
	case n < s.waitReplicas:
		cmd.SetErr(&fewReplicas{got: n, want: s.waitReplicas, within: within})
	}
	return cmd.Err()
}

// bannedReply reports whether v is a counting script's answer that a ban
// refuses the request: take.lua's {count, ms left, new, record}, or
// plan.lua's {0, count, ms left, new, record}, whose other answers have
// 1 value or 3 per limit.
func bannedReply(v any) bool {
	a, ok := v.([]any)
	switch {
	case ok && len(a) == 4:
		return true
	case ok && len(a) == 5:
		kind, ok := a[0].(int64)
		return ok && kind == 0
	}
	return false
}
