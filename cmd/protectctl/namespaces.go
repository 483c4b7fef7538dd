package main

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// publishedNamespaces lists the namespaces whose limits are published in
// the Redis of c: the keys <Namespace>limits (redisstore's documented
// layout), found by SCAN on every master. A namespace holds no { or },
// which tells these keys from a client's (<Namespace>{<key>}...). It
// scans the keyspace, so protectctl does it only when no -namespace or
// HTTP_PROTECT_NAMESPACE names the one to use.
func publishedNamespaces(ctx context.Context, c redis.UniversalClient) ([]string, error) {
	var mu sync.Mutex
	var out []string
	scan := func(ctx context.Context, node redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := node.ScanType(ctx, cursor, "*limits", 1000, "string").Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for _, k := range keys {
				ns := strings.TrimSuffix(k, "limits")
				if !strings.ContainsAny(ns, "{}") && !slices.Contains(out, ns) {
					out = append(out, ns)
				}
			}
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
	} else {
		err = scan(ctx, c)
	}
	slices.Sort(out)
	return out, err
}
