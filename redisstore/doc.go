// Package redisstore is the protect.Store that every instance of a service
// shares through Redis: one exact limit for all of them, as if there were
// one instance. It runs on any go-redis UniversalClient (a single node,
// Redis Cluster, Sentinel, or Valkey), and only programs that import it
// link go-redis.
//
// Dial makes a store on a client of its own from a URL of one node, and
// closes that client on Close:
//
//	redis://[user:password@]host:port[/db]
//	rediss://[user:password@]host:port[/db]   (TLS)
//	unix:///path/to/redis.sock
//
// A URL it cannot take is an error that wraps ErrURL and names the URL's
// scheme, host and port, never its password. The client Dial makes honours
// context deadlines, never retries a command, and dials once per call, so
// that protect.Config.StoreTimeout and the circuit breaker decide what a
// slow or dead Redis costs. Dial does not connect; the first command does
// (Store.Ping checks). For a Cluster, Sentinel, or a client configured
// otherwise, make the client and pass it to New, which never closes it:
//
//	store := redisstore.New(client, redisstore.Options{})
//	defer store.Close() // then client.Close()
//	p, err := protect.New(protect.Config{Store: store})
//
// Each counted request is one round trip: one EVALSHA of an embedded Lua
// script. A client's keys are <Namespace>{<key>}:c (its counter),
// <BanNamespace>{<key>}:b (its ban) and <BanNamespace>{<key>}:o (its
// offenses), in one cluster slot through the {<key>} hash tag; a plan's
// state is <Namespace>{<key>}:r:<name> and :q:<name>:<window>. Range bans
// are the hash <BanNamespace>ranges, key bans are listed from the sorted
// set <BanNamespace>bans (on a Cluster, one per slot,
// <BanNamespace>{<tag>}:bans), never by scanning the keyspace, and a
// namespace's published limits are <Namespace>limits. Counters, bans,
// offenses and plan states expire by Redis' own clock (PX).
//
// The store is written against protect's exported store SPI alone: it
// implements protect.Store and protect.Space, and the optional
// protect.CircuitStore, DeadlineSpace, BanHolder, BanPager and
// RangeBanCounter, and uses nothing unexported of package protect.
// docs/redis.md in the repository covers its options, Cluster, outages and
// cost.
package redisstore
