// Package redisstore is the store.Store that every instance of a service
// shares through Redis: one exact limit for all of them, as if there were
// one instance. It runs on any go-redis UniversalClient (a single node,
// Redis Cluster, Sentinel, or Valkey), and only programs that import it
// link go-redis.
//
// Dial makes a store on a client of its own from a URL that names the
// topology, and closes that client on Close:
//
//	redis://[user:password@]host:port[/db]        one node
//	rediss://[user:password@]host:port[/db]       one node, TLS
//	unix:///path/to/redis.sock                      one node, on a socket
//	redis+cluster://[user:password@]host:port,host:port
//	                                                Redis Cluster (rediss+cluster:// with TLS)
//	redis+sentinel://[user:password@]host:port,host:port/MASTER[/db]
//	                                                Sentinel (rediss+sentinel:// with TLS)
//
// A URL it cannot take is an error that wraps ErrURL and quotes the URL
// with its password replaced by xxxxx; so is a one-node URL that lists
// several hosts, and, from Dial's one round trip, a one-node URL whose
// server is a Cluster node (the error says to use redis+cluster://). The
// client Dial makes honours context deadlines, dials once per call, and
// on a Cluster reads its slot map every second, so that
// protect.Config.StoreTimeout and the circuit breaker decide what a slow
// or dead Redis costs. For a client configured otherwise, make it and
// pass it to New, which never closes it:
//
//	store := redisstore.New(client, redisstore.Options{})
//	defer store.Close() // then client.Close()
//	p, err := protect.New(protect.Config{Store: store})
//
// Whatever the client, the store never lets go-redis run a counting
// script twice (a script whose reply was lost may have counted: it is an
// error that the failure policy absorbs), while a Cluster client still
// follows MOVED and ASK; and a counting call that fails without the
// server's answer makes a Cluster client read its slot map again, so
// that a promoted replica takes the requests within seconds.
//
// Redis replicates asynchronously, so a master that dies may take with it
// the counts it acknowledged last. Options.WaitReplicas closes that
// window, as long as a replica that acknowledged is the one promoted:
// each count is followed by WAIT in the same round trip, on the
// same connection, and a count too few replicas acknowledged is an error
// wrapping ErrNotReplicated, which the failure policy decides.
//
// Each counted request is one round trip: one EVALSHA of an embedded Lua
// script. A client's keys are <Namespace>{<key>}:c (its counter),
// <BanNamespace>{<key>}:b (its ban) and <BanNamespace>{<key>}:o (its
// offenses), in one cluster slot through the {<key>} hash tag; a plan's
// state is <Namespace>{<key>}:r:<name> and :q:<name>:<window>. Range bans
// are the hash <BanNamespace>ranges, key bans are listed from the sorted
// set <BanNamespace>bans (on a Cluster, one per slot,
// <BanNamespace>{<tag>}:bans), never by scanning the keyspace, the
// allowlist is the hash <BanNamespace>allows (read into a local copy, as
// the range bans are), and a namespace's published limits are
// <Namespace>limits. Counters, bans,
// offenses and plan states expire by Redis' own clock (PX).
//
// The journal (store.Journal) is a Redis Stream beside each index of key
// bans, <BanNamespace>events (on a Cluster <BanNamespace>{<tag>}:events,
// one per slot, which Events merges), with the hash of the indexed bans'
// records, <BanNamespace>banrecs (<BanNamespace>{<tag>}:banrecs), that
// lets a ban Redis dropped by its TTL be journaled as over. The script
// that writes, lifts or ends a ban appends its event: one XADD more, no
// round trip more. It keeps about Options.JournalLength events
// [1,000,000] and Options.JournalAge [7 days].
//
// The store is written against package store, the SPI, alone: it
// implements store.Store and store.Space, and the optional
// store.CircuitStore, DeadlineSpace, BanHolder, BanPager,
// RangeBanCounter, Allowlist and Journal, and imports nothing else of
// protect.
// docs/redis.md in the repository covers its options, Cluster, outages and
// cost.
package redisstore
