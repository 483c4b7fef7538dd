// Protectd is protect as a decision service, for services written in any
// language: nginx (auth_request), Traefik (ForwardAuth), Caddy
// (forward_auth), HAProxy (the Lua action of examples/proxies/haproxy)
// and Envoy (ext_authz, HTTP service) ask it about each request before
// they pass the request on.
//
//	usage: protectd [-check]
//
// -check reads the settings and the plans file, prints the settings in
// force, asks the store to answer and says what it is, and exits: 2 on
// a bad setting (every one reported at once, under its variable's name),
// 1 when the store does not answer. A redis:// URL to a Cluster node is a
// bad setting, saying to use redis+cluster:// (see redisstore.Dial), at
// start as in -check.
//
// Every line protectd logs is JSON, on stderr: its own, and those of
// the packages beneath it (the state file's, go-redis's, grpc's, the log
// package's). -check prints its findings as text: each mistake on a
// line of its own, "store: memory, state file PATH" or "store: redis at
// ADDR, answered in …", or the one sentence of a Redis that does not
// answer.
//
// At start and in -check, protectd logs a warning for a Redis whose
// eviction policy can evict bans or that keeps nothing across a restart
// (docs/redis.md has the settings to use).
//
// # Settings
//
// protectd reads the HTTP_PROTECT_* environment of package envconfig, just
// as strictly: an unknown name or a bad value exits 2 with the setting
// quoted. The memory store is the default; HTTP_PROTECT_REDIS_URL shares
// one Redis between every protectd instance and protectctl. It reads
// names of its own, and needs two of protect's:
//
//	HTTP_PROTECT_LISTEN            where it listens: host:port, or unix:PATH [127.0.0.1:8089]
//	HTTP_PROTECT_PLANS             the plans file (JSON, see envconfig.ParsePlans),
//	                               or the JSON itself when the value starts with "{"
//	HTTP_PROTECT_GRPC_LISTEN       host:port or unix:PATH of the gRPC services for
//	                               Envoy and Istio [off]
//	HTTP_PROTECT_TRUSTED_PROXIES   the proxy's address as protectd sees it
//	HTTP_PROTECT_REDIS_URL         one Redis for every instance: redis://, rediss://,
//	                               unix://, redis+cluster://h:p,h:p or
//	                               redis+sentinel://h:p,h:p/MASTER [none: memory store]
//	HTTP_PROTECT_ADMIN_LISTEN      where the admin API listens: host:port, or
//	                               unix:/path [none: off]
//	HTTP_PROTECT_ADMIN_TOKEN       the admin API's bearer token, 16 characters
//	                               or more; required on TCP
//	HTTP_PROTECT_ADMIN_ORIGINS     the dashboard's origins behind a proxy,
//	                               scheme://host[:port], commas between [its own]
//	HTTP_PROTECT_STATE_FILE        a file that keeps the memory store's bans and plan
//	                               state across restarts [none]; not with REDIS_URL
//	HTTP_PROTECT_REDIS_WAIT_REPLICAS  with REDIS_URL: the replicas that must have
//	                               each count before it is acknowledged [0: none]
//	HTTP_PROTECT_REDIS_WAIT_TIMEOUT   how long a count waits for them, at most
//	                               half of STORE_TIMEOUT [50ms]
//
// Block lists (docs/blocklists.md): HTTP_PROTECT_BLOCKLISTS names lists of
// files and URLs, refused with 403 and code blocked before anything is
// counted; and protectd bounces for a CrowdSec Local API with names of its
// own:
//
//	HTTP_PROTECT_CROWDSEC_URL       the LAPI, such as http://127.0.0.1:8080 [none]
//	HTTP_PROTECT_CROWDSEC_KEY       a bouncer key, from cscli bouncers add NAME
//	HTTP_PROTECT_CROWDSEC_INTERVAL  how often it asks for new decisions [10s, at least 1s]
//
// A list written challenge:PATH in HTTP_PROTECT_BLOCKLISTS challenges its
// addresses instead (see The challenge below); so do CrowdSec's captcha
// decisions, as the list crowdsec-captcha, when the challenge is on.
//
// SIGHUP checks every list file and URL at once, beside their Refresh:
// the lists side by side, each within 30 seconds, so that a slow list's
// server delays only its own list. A SIGHUP while a reload runs asks for
// one more after it (logged "SIGHUP: a reload is running; one more
// follows it"); more of them during the same reload ask for that one.
//
// protectd serves only proxies: keep HTTP_PROTECT_LISTEN off the public
// network (a listen address other machines can reach is logged as a
// warning). HTTP_PROTECT_TRUSTED_PROXIES is required: without it every
// request would be counted as the proxy's, so protectd refuses to start;
// write none when clients reach protectd directly.
//
// On a unix socket (HTTP_PROTECT_LISTEN=unix:/run/protectd.sock) the
// proxy on the same host skips TCP. protectd creates the socket with mode
// 0660: its owner and group may connect, so run it with the proxy's group.
// A socket file left by a protectd that was killed is removed at start (a
// socket something answers on, or any other file, is an error); protectd
// removes its socket when it stops. Set HTTP_PROTECT_TRUST_UNIX_SOCKET=true
// for protectd to believe the proxy's X-Forwarded-For there.
//
// # Paths
//
//	/verify        any method, and any path below it (Envoy appends the
//	               original path): the decision
//	GET /healthz   200 while the process serves
//	GET /metrics   the metrics of package metrics, and Go's and the process's
//
// /verify answers 200 with no body, RateLimit-Policy and RateLimit when the
// request may pass. When it may not, it answers with the decision's status
// (429, 403 for a ban, 503), Retry-After, Cache-Control: no-store and a
// problem+json body with a code (rate_limited, banned, unknown_client,
// unavailable, quota_exceeded, unknown_plan, blocked), or the challenge's
// page (below). Every answer carries
// X-Protect-Status, the status the client is to get, and,
// when a key was counted, X-Protect-Key; a refusal also carries
// X-Protect-Code, the problem's code.
//
// A proxy that understands only 2xx, 401 and 403 from an auth service, as
// nginx's auth_request does, sends X-Protect-Refusal-Status: 403 (or 401).
// protectd then refuses with that status, and puts the real status in
// X-Protect-Status and the problem body in X-Protect-Problem, for the proxy
// to answer the client with.
//
// # The challenge
//
// With the challenge on (docs/challenge.md), a client past its threshold,
// or on a list marked to challenge, gets a proof-of-work page instead of a
// refusal; a browser solves it and is served with the pass cookie it buys.
//
//	HTTP_PROTECT_CHALLENGE             true: on, with the defaults [off]; any of
//	                                   the four below turns it on too
//	HTTP_PROTECT_CHALLENGE_AFTER       the count past which a client is
//	                                   challenged [HTTP_PROTECT_MAX_REQUESTS]
//	HTTP_PROTECT_CHALLENGE_SECRET      the HMAC key of nonces and passes, 16 bytes
//	                                   or more, the same on every instance
//	                                   [random, made at start, logged as a warning]
//	HTTP_PROTECT_CHALLENGE_DIFFICULTY  leading zero bits of the work, 1 to 32 [15]
//	HTTP_PROTECT_CHALLENGE_PASS_TTL    how long a pass lasts [1h]
//
// /verify answers a challenged client 403 with the page (text/html, its
// Content-Security-Policy, X-Protect-Code: challenged), returning to the
// original URI; under X-Protect-Refusal-Status it answers 401 with no
// body instead, and the proxy fetches the page:
//
//	GET /challenge         the page for the key in X-Protect-Key, returning to
//	                       X-Original-URI; from a trusted proxy only
//	POST /.protect/challenge  the page's answer, which the proxy passes on:
//	                       a right one sets the pass cookie protect_pass and
//	                       answers 303; any other counts one failure
//
// The proxy sends the client's Cookie header with each check: a valid
// pass lets the client through, still counted. examples/proxies has the
// nginx, Caddy, HAProxy and Envoy configs.
//
// # gRPC: Envoy and Istio
//
// With HTTP_PROTECT_GRPC_LISTEN set, protectd also serves
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit (Envoy's
// global rate limit filter: a descriptor with a remote_address entry runs
// the address pipeline; one with consumer and plan entries holds the
// consumer to that plan at a cost of hits_addend) and
// envoy.service.auth.v3.Authorization/Check (Envoy's ext_authz filter and
// Istio's CUSTOM action: the client from the request's source address and
// X-Forwarded-For, denied_response with the status, headers and
// problem+json body /verify answers with, or the challenge's page). Under
// HTTP_PROTECT_ON_STORE_ERROR=closed a dead store makes ShouldRateLimit
// fail with the gRPC code Unavailable, for Envoy's failure_mode_deny to
// decide. docs/envoy.md gives every rule. Keep this listener private too:
// a caller names the address to count.
//
// # The admin API
//
// HTTP_PROTECT_ADMIN_LISTEN serves package admin's Handler, on a listener
// of its own: the bans (GET, POST and DELETE /v1/bans), inspect, explain,
// check and protectors under /v1/, in protectctl's -json schema, which
// protectctl -server uses. It is how a protectd on the memory store is
// administered; a lift holds on the next /verify. A TCP address needs
// HTTP_PROTECT_ADMIN_TOKEN: protectd refuses to start without it, naming
// both variables; a token set blank, or with whitespace at either end
// (which no request can send), is refused too. Each request must then carry
// "Authorization: Bearer
// <token>", compared in constant time; a missing or wrong one is 401 with
// code unauthorized, and changes nothing. A unix socket may go without a
// token: protectd makes the socket file mode 0600, so only its own user
// connects (a stale socket file is replaced; one another process serves is
// an error). The token crosses the network in clear: keep a TCP admin
// address on a private network. docs/admin.md in the repository lists the
// paths and their errors.
//
// The same listener serves a web dashboard at / (admin.Dashboard):
// decisions per second, the store and breaker, the keys /verify refuses
// most, the bans (search, lift, ban), the allowlist, the block lists and
// the journal, live. The token is entered once in its login form and
// kept in an HttpOnly, SameSite=Strict session cookie; each write from
// the page carries a CSRF token and must come from the page's origin.
// Behind a proxy that terminates TLS or rewrites Host, that origin is
// not the listener's own: HTTP_PROTECT_ADMIN_ORIGINS names the origins a
// browser opens the dashboard at (https://admin.example.com), and the
// cookie is then Secure for an https one. Each entry must be
// scheme://host[:port]; any other is refused at start, naming it.
//
// # Who the client is
//
// protectd's peer is the proxy, so HTTP_PROTECT_TRUSTED_PROXIES lists it,
// and the client comes from the header the proxy writes (X-Forwarded-For,
// read right to left, or HTTP_PROTECT_PROXY_HEADER), by the rules of
// Protector.Verify: a forged entry left of the one the proxy appends is
// never believed. A peer that is not trusted is the client itself,
// whatever headers it sends.
//
// # Consumers and plans
//
// A gateway that has authenticated the request names the consumer and its
// plan in X-Protect-Consumer and X-Protect-Plan. The consumer is then held
// to that plan of HTTP_PROTECT_PLANS (Protector.VerifyConsumer), after the
// address's unknown, safe and ban checks. protectd believes these headers
// only from a trusted peer, and the proxy must drop the ones a client sends.
// A plan name protectd does not know, or a consumer without a plan, is
// refused with 503 and code unknown_plan, and logged at level ERROR with
// the name: never unlimited, and never quietly moved to the address's
// limit. With HTTP_PROTECT_DRY_RUN=true it is logged and served, as every
// refusal is. A plan without a consumer is ignored, and the address is
// counted.
//
// # Firewall and CrowdSec bouncers
//
// protectd can hand every ban it holds (automatic, manual, and the range
// bans of escalation) to the kernel and to CrowdSec's bouncers:
//
//	HTTP_PROTECT_NFT           the nftables sets it keeps equal to the bans:
//	                           "FAMILY TABLE SET4 SET6" ("-" for no set), or
//	                           true for "inet protect ban4 ban6" [off]
//	HTTP_PROTECT_NFT_INTERVAL  how often it lists the bans, 1ms to 1m [500ms]
//	HTTP_PROTECT_LAPI_LISTEN   where it answers CrowdSec bouncers, each one's
//	                           place in the feed kept in the store, so that
//	                           any protectd on it answers any bouncer [off]
//	HTTP_PROTECT_LAPI_KEYS     their API keys, a comma list or a file (a path
//	                           starting with / or ./, a key a line, # comments);
//	                           each at least 16 characters
//	HTTP_PROTECT_LAPI_BLOCKLISTS  true: hand the block lists' entries to
//	                           bouncers too, beside the bans, each for a
//	                           lease of a day renewed every 12h [false]
//	HTTP_PROTECT_WEBHOOK_URL   where it posts the journal's events, http or
//	                           https [off]
//	HTTP_PROTECT_WEBHOOK_SECRET  the key each post is signed with, at least
//	                           16 bytes; needed with the URL
//	HTTP_PROTECT_CROWDSEC_MACHINE_ID  a machine of the LAPI of
//	                           HTTP_PROTECT_CROWDSEC_URL, from cscli machines
//	                           add NAME --password PW: protectd pushes its
//	                           bans to that LAPI [off]
//	HTTP_PROTECT_CROWDSEC_PASSWORD  the machine's password; needed with the id
//
// The sets are the operator's, made beforehand with flags interval and
// timeout; a missing one stops protectd at start with an error that names
// it. Each element's timeout is the ban's time left, and nothing is
// removed at exit: the kernel keeps enforcing while protectd is down, and
// a restart writes only what changed. The Local API answers GET
// /v1/decisions/stream (startup=true, then what changed since that key's
// last pull) and GET /v1/decisions (ip=, range= and contains=, scope=,
// value=, type=), checking X-Api-Key (403 when wrong). The webhook posts
// each event of the journal (ban, lift, expiry, allow, disallow,
// allow-expire) written after protectd started, in batches of up to 100
// as {"events": [...]}, each stamped with X-Protect-Timestamp (Unix
// seconds) and signed in X-Protect-Signature ("sha256=" and the hex of
// the HMAC-SHA256 of the timestamp, "." and the body); a failed post is
// retried with a backoff from 1s to 1m, each try stamped and signed
// anew, and while the receiver is down at most 10,000 events wait, the
// oldest dropped beyond. The CrowdSec machine logs in (POST
// /v1/watchers/login), pushes each ban of an address or range written
// after protectd started as an
// alert with a decision of origin protect, scenario "protect/" and the
// reason, and the ban's time left (POST /v1/alerts, up to 100 a post),
// and deletes the protect decisions of a value lifted or expired (DELETE
// /v1/decisions), with the same backoff and bound; a URL and a machine
// without HTTP_PROTECT_CROWDSEC_KEY push without pulling. docs/firewall.md
// in the repository shows the set-up.
//
// # Logs, signals and limits
//
// protectd logs JSON lines to stderr: one "refused" line per refusal
// (status, decision, code, client, key, retry_after, policy, the original
// method and uri, each cut to 256 bytes, and err when a store error was
// absorbed). The method and uri are those the proxy reports:
// X-Original-Method and X-Original-URI (nginx, as configured),
// X-Forwarded-Method and X-Forwarded-Uri (Traefik, Caddy), or the method
// and the path below /verify (Envoy), and the ban, lift and store events of
// the library. SIGTERM or SIGINT drains the requests in flight, for up to
// 10s, and exits 0. The request headers must arrive within 5s and the
// whole request within 10s, so a slow client cannot hold connections open;
// request headers larger than 64 KiB are refused.
//
// # Exit status
//
// 0 after -h, -check or a graceful shutdown; 1 when a listener (the main
// one, or the admin API's) cannot be opened, the nftables sets cannot be
// used, serving fails, or -check
// finds the store not answering; 2 on a bad flag, an argument, or a bad
// setting.
//
// # Example
//
//	HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1 \
//	HTTP_PROTECT_MAX_REQUESTS=100 HTTP_PROTECT_BAN_LIMIT=500 \
//	HTTP_PROTECT_REDIS_URL=redis://10.0.0.5:6379/0 \
//	protectd
//
//	HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1 \
//	HTTP_PROTECT_ADMIN_LISTEN=unix:/run/protectd/admin.sock \
//	protectd &
//	protectctl -server unix:/run/protectd/admin.sock bans
//
// docs/protectd.md in the repository gives a configuration for each proxy.
package main
