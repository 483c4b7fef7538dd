package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/httpprotect/protect/store"
	"github.com/redis/go-redis/v9"
)

// What protect keeps in Redis and how Redis may lose it. Bans, offense
// histories, the ban index and published limits are state: nothing else
// holds them, and a key Redis drops is a ban lifted with no log line.
// Two settings decide whether Redis drops them:
//
//   - maxmemory-policy: with maxmemory reached, allkeys-* evicts any key
//     (permanent bans and the index too), volatile-* any key with a TTL
//     (every temporary ban and offense history, the published limits).
//     Only noeviction keeps them: writes then fail, the failure policy
//     answers, and nothing is lifted.
//   - persistence: with neither AOF nor RDB snapshots, a restart of
//     Redis starts empty.
//
// Counters are not state in that sense (they are forgotten after TTL
// anyway); their cost in memory is what maxmemory must allow for. The
// advice is a Redis of protect's own (docs/redis.md): noeviction and AOF.

// fixAdvice is what every warning advises.
const fixAdvice = "give protect a Redis of its own with maxmemory-policy noeviction and AOF (appendonly yes), sized as docs/redis.md says"

// CheckSetup implements protect.SetupChecker: it reads maxmemory,
// maxmemory-policy, appendonly and save on every node that holds keys
// (CONFIG GET), and warns of a policy that can evict bans and of a node
// without persistence. On a server that refuses CONFIG (a managed Redis
// may) it returns an error saying it could not check.
func (s *Store) CheckSetup(ctx context.Context) ([]store.SetupWarning, error) {
	var mu sync.Mutex
	warnings := []store.SetupWarning{}
	err := s.topo.eachNode(ctx, func(ctx context.Context, c redis.Cmdable) error {
		conf, err := c.ConfigGet(ctx, "*").Result()
		if err != nil {
			return err
		}
		server := s.Addr() // the server checked: a node's own, on a cluster
		if n, ok := c.(*redis.Client); ok {
			server = n.Options().Addr
		}
		ws := setupWarnings(conf, server)
		mu.Lock()
		warnings = append(warnings, ws...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("protect: cannot check the eviction policy and persistence of redis at %s (CONFIG GET refused: %w); check them by hand (docs/redis.md)", s.Addr(), err)
	}
	return warnings, nil
}

// setupWarnings reads one node's settings.
func setupWarnings(conf map[string]string, server string) []store.SetupWarning {
	var out []store.SetupWarning
	policy, shown := conf["maxmemory-policy"]
	limitNote := ""
	if conf["maxmemory"] == "0" {
		limitNote = " (maxmemory is 0 now, no limit: nothing is evicted until one is set, as managed servers do)"
	}
	switch {
	case !shown:
		// A server that answers CONFIG GET without it (a managed one may
		// hide some settings) is not known to keep bans: say so, rather
		// than pass what was not checked.
		out = append(out, store.SetupWarning{Setting: "maxmemory-policy", Value: "not shown", Server: server,
			Risk: "the server's CONFIG GET does not show it, so it could not be checked: allkeys-* would evict any key, bans and the ban index too, and volatile-* every temporary ban",
			Fix:  "make sure it is noeviction; " + fixAdvice})
	case strings.HasPrefix(policy, "allkeys-"):
		out = append(out, store.SetupWarning{Setting: "maxmemory-policy", Value: policy, Server: server,
			Risk: "when Redis reaches maxmemory it evicts any key: bans, permanent ones too, the ban index, offense histories and published limits, so banned clients are served again with nothing in the log" + limitNote,
			Fix:  fixAdvice})
	case strings.HasPrefix(policy, "volatile-"):
		out = append(out, store.SetupWarning{Setting: "maxmemory-policy", Value: policy, Server: server,
			Risk: "when Redis reaches maxmemory it evicts keys with a TTL: every temporary ban, offense history and counter, and the published limits (every automatic ban has a TTL), so banned clients are served again with nothing in the log" + limitNote,
			Fix:  fixAdvice})
	}
	aof, aofShown := conf["appendonly"]
	save, saveShown := conf["save"]
	switch {
	case aof == "yes" || strings.TrimSpace(save) != "":
		// AOF or snapshots, whatever the other shows.
	case !aofShown && !saveShown:
		out = append(out, store.SetupWarning{Setting: "persistence", Value: "not shown", Server: server,
			Risk: "the server's CONFIG GET shows neither appendonly nor save, so it could not be checked: without either, Redis keeps nothing across a restart",
			Fix:  "make sure AOF is on (appendonly yes); " + fixAdvice})
	case !aofShown || !saveShown:
		// One is off and the other is not shown: it may be the one on.
		value := fmt.Sprintf("appendonly %s, save not shown", aof)
		if !aofShown {
			value = `appendonly not shown, save ""`
		}
		out = append(out, store.SetupWarning{Setting: "persistence", Value: value, Server: server,
			Risk: "the server's CONFIG GET does not show one of appendonly and save, and the other is off, so it could not be checked: without either, Redis keeps nothing across a restart",
			Fix:  "make sure AOF is on (appendonly yes); " + fixAdvice})
	default:
		out = append(out, store.SetupWarning{Setting: "persistence", Value: "appendonly no, save \"\"", Server: server,
			Risk: "Redis keeps nothing across a restart: every ban, offense history and published limit is gone when it restarts",
			Fix:  "turn on AOF (appendonly yes, appendfsync everysec); " + fixAdvice})
	}
	return out
}
