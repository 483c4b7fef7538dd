// Package protect is an IP protection and ban-list engine for HTTP
// services: one call per request decides whether a client may pass, every
// instance of a service shares the decision through Redis, and bans
// expire, escalate for repeat offenders, and can be listed and lifted.
//
// # The pipeline
//
// Protector.Verify decides in a fixed order; the first step that decides
// ends it:
//
//  1. Unknown address: the client cannot be determined (a malformed
//     forwarding header, say). Refused with 429, never counted: input a
//     client can craft must never let it escape the limiter.
//  2. Safe networks: never counted, never banned, the store untouched.
//     Then Config.BlockLists: an address on a list you feed in (Spamhaus
//     DROP, FireHOL, IPsum, CrowdSec's decisions through package
//     crowdsec) is Blocked, refused with 403 and code blocked, the store
//     untouched. Lists are not bans: see BlockList.
//  3. Block list: the client's key, or a range containing its address, is
//     banned. Refused with 403 and Retry-After.
//  4. Ban threshold: this request takes the stream past BanLimit. A ban is
//     written and the request refused.
//  5. Stream limit: the stream is past MaxRequests. Refused with 429.
//  6. Otherwise allowed.
//
// Steps 3–5 are one atomic store operation: on Redis, one round trip.
// Protector.Check runs the same pipeline through the same operation
// without counting or writing anything.
//
// # The stream counter
//
// Each client has one counter. Every request adds one and resets its
// expiry to TTL; it is forgotten only after TTL without a request. So
// MaxRequests limits how long a client may talk without pausing, not how
// fast it talks. With MaxRequests 5 and TTL 3s, a client sending one
// request every 2.5s is refused at its 6th request, although it sends a
// quarter of what "5 per 3 seconds" sounds like; any pause longer than 3s
// starts it over. Choose TTL shorter than a normal user's pauses, and
// MaxRequests above what a normal user sends without such a pause.
//
// # Plans
//
// A paying customer is held to a Plan, not to the stream counter:
// NewPlan combines Rates (token buckets computed as GCRA: Limit per
// Period, bursts of Burst) and Quotas (per calendar hour, day or month,
// UTC). Protector.VerifyConsumer allows a request only if every limit of
// the plan does, and only then charges it, in one atomic store step.
// A rate refuses with Limited, a quota with Exhausted, so that a client can
// tell "slow down" from "come back next month". Config.Plan holds every
// address to a plan instead of MaxRequests.
//
// # Counting failures
//
// With Config.CountStatus, Middleware counts only the responses whose
// status it selects (401s on a login form, 404s for a scanner trap): a
// client is limited and banned for its failures, not its requests.
// Handlers that decide failure themselves call Protector.Penalize.
//
// # Who the client is, and where state lives
//
// The connecting peer is the client unless it is one of TrustedProxies;
// behind them the forwarding header is read right to left, trusted hops
// skipped. IPv4 clients are counted per address, IPv6 per /64. Bans last
// BanDuration × BanFactor^(n−1), capped at MaxBanDuration, n counting the
// key's bans within OffenseWindow; operators add and lift them
// (Protector.Ban and Lift, protectctl, package admin).
//
// A Store keeps counters, plan states and bans: by default one of package
// memstore, made by New; shared by every instance, one of package
// redisstore. Package store is the SPI a store implements. A store
// outside this process is called through a guard: a deadline
// (StoreTimeout), a circuit breaker, and OnStoreError meanwhile
// (FailLocal, FailOpen, FailClosed). Protector.Stats counts what the
// protector decided; package metrics exports it to Prometheus.
//
// # Further reading
//
// The guides in the repository's docs/ directory cover each part in
// depth: configuration.md (every field, and the HTTP_PROTECT_* environment
// of package envconfig), decisions.md, client-addresses.md, bans.md,
// plans.md, failures.md, several-protectors.md, redis.md, stores.md
// (writing a store), protectd.md, protectctl.md, metrics.md and
// performance.md.
package protect
