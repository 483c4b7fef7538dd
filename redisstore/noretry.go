package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// A counting script must run at most once per call. A script whose reply
// was lost (a connection reset, an EOF, a read deadline) may have counted;
// running it again counts the request twice, and go-redis runs it again
// in more than one place: a Client with MaxRetries above zero, and a
// ClusterClient whatever its MaxRetries (it retries the same node, then
// another, on EOF and connection errors, up to MaxRedirects). Setting
// MaxRedirects to -1 would stop that, and MOVED and ASK with it, which a
// Cluster needs.
//
// go-redis asks each command whether it may run again (Cmder.NoRetry):
// the Client's retry loop and the ClusterClient's alike skip a command
// that says no, while the ClusterClient still follows MOVED and ASK (the
// server did not run the command, and said where to) and still retries
// after READONLY (a former master that did not run it). So each counting
// script goes as a command that says no, whatever client the store was
// given: a lost reply is an error that the failure policy absorbs,
// never a second count.

// onceScripter runs scripts through the store's client as commands that
// go-redis never sends twice. It is one pointer, so it passes as a
// redis.Scripter without allocating.
type onceScripter struct{ s *Store }

// onceCmd is a command that go-redis must not retry.
type onceCmd struct{ *redis.Cmd }

// NoRetry implements redis.Cmder.
func (onceCmd) NoRetry() bool { return true }

// once returns the store's client as a redis.Scripter whose scripts run
// at most once per call.
func (s *Store) once() onceScripter { return onceScripter{s} }

// counting returns once() for the counting scripts (the take and plan
// scripts), each followed by WAIT when Options.WaitReplicas asks
// (replicated.go). It is one pointer too.
func (s *Store) counting() countScripter { return countScripter{onceScripter{s}} }

// countScripter is a onceScripter whose scripts are counts.
type countScripter struct{ onceScripter }

// Eval implements redis.Scripter.
func (c countScripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return c.eval(ctx, "eval", script, keys, args, c.s.waitReplicas > 0)
}

// EvalSha implements redis.Scripter.
func (c countScripter) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return c.eval(ctx, "evalsha", sha1, keys, args, c.s.waitReplicas > 0)
}

// eval runs one script once, followed by WAIT when replicated.
func (o onceScripter) eval(ctx context.Context, name, payload string, keys []string, args []any, replicated bool) *redis.Cmd {
	cmdArgs := make([]any, 3+len(keys), 3+len(keys)+len(args))
	cmdArgs[0], cmdArgs[1], cmdArgs[2] = name, payload, len(keys)
	for i, k := range keys {
		cmdArgs[3+i] = k
	}
	cmd := redis.NewCmd(ctx, append(cmdArgs, args...)...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	var err error
	if replicated && len(keys) > 0 {
		err = o.s.processReplicated(ctx, onceCmd{cmd}, keys[0]) // replicated.go
	} else {
		err = o.s.client.Process(ctx, onceCmd{cmd})
	}
	o.s.topo.failed(ctx, err)
	return cmd
}

// Eval implements redis.Scripter.
func (o onceScripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return o.eval(ctx, "eval", script, keys, args, false)
}

// EvalSha implements redis.Scripter.
func (o onceScripter) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return o.eval(ctx, "evalsha", sha1, keys, args, false)
}

// EvalRO implements redis.Scripter.
func (o onceScripter) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return o.eval(ctx, "eval_ro", script, keys, args, false)
}

// EvalShaRO implements redis.Scripter.
func (o onceScripter) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return o.eval(ctx, "evalsha_ro", sha1, keys, args, false)
}

// ScriptExists implements redis.Scripter.
func (o onceScripter) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return o.s.client.ScriptExists(ctx, hashes...)
}

// ScriptLoad implements redis.Scripter.
func (o onceScripter) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return o.s.client.ScriptLoad(ctx, script)
}
