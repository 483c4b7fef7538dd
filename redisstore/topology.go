package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// topology is what a store knows of the shape of the Redis behind it:
// one node, a Cluster, a Ring or Sentinel's master, told by the kind of
// its client, and the per-node work that follows from it.
type topology struct {
	client        redis.UniversalClient
	log           *slog.Logger
	where         string      // the redacted Sentinel URL Dial was given, for Addr
	warnedCluster atomic.Bool // the one-node client was told MOVED, and said so
}

// addr names the server, as Store.Addr does.
func (t *topology) addr() string {
	if t.where != "" {
		return t.where
	}
	switch c := t.client.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	}
	return "redis"
}

// isCluster reports whether the store's client is a Redis Cluster client.
func (t *topology) isCluster() bool {
	_, ok := t.client.(*redis.ClusterClient)
	return ok
}

// eachNode runs f on every node that holds keys: every master of a
// cluster, every shard of a ring, or the one server.
func (t *topology) eachNode(ctx context.Context, f func(context.Context, redis.Cmdable) error) error {
	switch c := t.client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return f(ctx, m) })
	case *redis.Ring:
		return c.ForEachShard(ctx, func(ctx context.Context, m *redis.Client) error { return f(ctx, m) })
	}
	return f(ctx, t.client)
}

// keyNode returns the client of the one server that holds key: the
// store's own client, or on a Cluster or a Ring the client of the key's
// master or shard.
func (t *topology) keyNode(ctx context.Context, key string) (*redis.Client, error) {
	switch c := t.client.(type) {
	case *redis.Client: // one node, or Sentinel's master
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Ring:
		return c.GetShardClientForKey(key)
	}
	return nil, errWaitClient
}

// checkTopology makes Dial's one round trip: it refuses a one-node client
// whose server is a Cluster node, and a Cluster client whose server is
// not one. A server that does not answer, or does not let this user
// ask, is no error here: the failure policy decides until it answers.
func checkTopology(ctx context.Context, c redis.UniversalClient, rawURL string) error {
	switch c := c.(type) {
	case *redis.ClusterClient:
		// ForEachMaster reads the slot map (CLUSTER SLOTS) and calls
		// nothing more, with a function that does nothing.
		err := c.ForEachMaster(ctx, func(context.Context, *redis.Client) error { return nil })
		if isReply(err) && strings.Contains(err.Error(), "cluster support disabled") {
			scheme, _, _ := strings.Cut(rawURL, "+")
			return urlError(rawURL, "the server is not a Redis Cluster node (cluster support disabled): use "+scheme+"://host:port for one node, or "+scheme+"+sentinel://…/MASTER for Sentinel")
		}
	case *redis.Client:
		info, err := c.Info(ctx, "cluster").Result()
		if err == nil && clusterEnabled(info) {
			scheme, rest, _ := strings.Cut(rawURL, "://")
			hosts, _ := urlHosts(rest)
			if scheme == "unix" {
				hosts = "host:port"
			}
			return urlError(rawURL, fmt.Sprintf("the server is a Redis Cluster node (cluster_enabled:1), where a one-node client fails with MOVED or counts per node: use %s+cluster://%s[,host:port…]",
				scheme, strings.TrimPrefix(redactURL("redis://"+hosts), "redis://")))
		}
	}
	return nil
}

// clusterEnabled reads cluster_enabled from INFO cluster.
func clusterEnabled(info string) bool {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cluster_enabled:"); ok {
			return v == "1"
		}
	}
	return false
}

// isReply reports whether err is an answer of the server (an error
// reply), rather than a lost connection, a deadline or a client's own.
func isReply(err error) bool {
	var re redis.Error
	return err != nil && errors.As(err, &re)
}

// isRedirect reports whether err is a Cluster's MOVED or ASK answer.
func isRedirect(err error) bool {
	if !isReply(err) {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// failed is told of the error of each counting script and each read of
// the range bans. On a Cluster, an error
// that is not the server's answer (a refused or lost connection, a
// deadline) may be a dead master: go-redis reads the slot map again only
// after a MOVED, or every ClusterStateReloadInterval, and a dead master
// answers no MOVED, so the store asks for the reload itself; go-redis
// runs one reload at a time and coalesces the rest. A MOVED or ASK that
// reaches the store says the map is stale, and reloads it too. On one
// node, a MOVED or CROSSSLOT answer means a Cluster node behind a one-node client, said
// once in the log, as Dial says it at once.
func (t *topology) failed(ctx context.Context, err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	switch c := t.client.(type) {
	case *redis.ClusterClient:
		// A MOVED or ASK reaches the store only from a node's own client
		// (replicated.go), which follows none: the map is stale. A WAIT
		// short of replicas is the master's answer: the map is right.
		var few *fewReplicas
		if !isReply(err) && !errors.As(err, &few) || isRedirect(err) {
			c.ReloadState(ctx)
		}
	case *redis.Client:
		msg := err.Error()
		if (isRedirect(err) || isReply(err) && strings.HasPrefix(msg, "CROSSSLOT ")) &&
			t.warnedCluster.CompareAndSwap(false, true) {
			t.log.Error("protect: the redis server is a Redis Cluster node behind a one-node client: every request is decided by the failure policy; use a redis+cluster:// URL or a redis.ClusterClient", "redis", t.addr(), "error", msg)
		}
	}
}
