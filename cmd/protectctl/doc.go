// Protectctl lists, adds and lifts the bans of services protected by
// protect, in the Redis they share, with the settings they use, or
// through a running service's admin API.
//
//	usage: protectctl [-redis URL] [-server URL [-token TOKEN]] [-namespace NS] COMMAND [flags] [args]
//
// The store is -redis URL, or HTTP_PROTECT_REDIS_URL when -redis is not
// given. Every other setting comes from the same HTTP_PROTECT_* environment
// the services read (package envconfig), so protectctl aggregates and
// trusts addresses exactly as they do: lifting 2001:db8:1:2::99 lifts
// 2001:db8:1:2::/64. Run it with the services' environment. Like them it
// refuses an HTTP_PROTECT_* name it does not know, since a typo would apply
// a default; the names protectd reads (HTTP_PROTECT_LISTEN,
// HTTP_PROTECT_PLANS, HTTP_PROTECT_GRPC_LISTEN, HTTP_PROTECT_ADMIN_LISTEN,
// HTTP_PROTECT_ADMIN_TOKEN, HTTP_PROTECT_NFT, HTTP_PROTECT_NFT_INTERVAL,
// HTTP_PROTECT_LAPI_LISTEN, HTTP_PROTECT_LAPI_KEYS, HTTP_PROTECT_CROWDSEC_URL,
// HTTP_PROTECT_CROWDSEC_KEY, HTTP_PROTECT_CROWDSEC_INTERVAL) and
// HTTP_PROTECT_ADMIN_URL are accepted.
//
// A service on the memory store keeps its bans inside its own process:
// protectctl reaches them through the service's admin API (package
// admin's Handler; protectd serves it on HTTP_PROTECT_ADMIN_LISTEN), with
// -server URL, or HTTP_PROTECT_ADMIN_URL when neither -server nor -redis
// is given. Every command then runs in the service, with its own
// settings and protectors, and prints exactly what it prints on Redis; a
// lift holds on the service's next request. The environment is not read
// for anything else on that path.
//
// # Global flags
//
//	-redis URL
//		the Redis URL: redis://[user:password@]host:port[/db],
//		rediss://... (TLS) or unix:///path for one node,
//		redis+cluster://host:port,host:port for a Cluster,
//		redis+sentinel://host:port,host:port/MASTER[/db] for Sentinel
//		(rediss+... with TLS) [$HTTP_PROTECT_REDIS_URL]
//	-server URL
//		a running service's admin API: http://host:port, https://host:port,
//		or unix:/path for a unix socket [$HTTP_PROTECT_ADMIN_URL]
//	-token TOKEN
//		the admin API's bearer token, sent as Authorization: Bearer
//		[$HTTP_PROTECT_ADMIN_TOKEN]
//	-namespace NS
//		the namespace of both the bans and the counters; without it the
//		ban list is $HTTP_PROTECT_BAN_NAMESPACE and the counters that
//		inspect shows are under $HTTP_PROTECT_NAMESPACE (both "protect:"
//		by default)
//
// # Several protectors
//
// A service may run several protectors (an address gate, a consumer plan,
// a login guard), each counting under its own namespace and, by default,
// banning in one shared list. bans, inspect, explain and check cover all
// of them: bans lists every ban list (with a LIST column when there are
// several), inspect and explain report each protector under its
// namespace, and protectors lists them. -namespace NS keeps the one whose
// namespace or ban list is NS; through -server, a namespace the service
// does not have is an error (exit 2) that names those it has, never an
// empty answer.
//
// On Redis, the protectors are those whose limits are published in the
// store (each service publishes its namespaces' limits); without
// -namespace or HTTP_PROTECT_NAMESPACE protectctl finds them with a SCAN
// for <namespace>limits. -namespace NS counts and bans in NS, as a service
// that keeps both in one namespace does; when NS is a counter namespace
// that a service published and $HTTP_PROTECT_BAN_NAMESPACE (protect:
// by default) is another list, that list is read too, for that is where
// such a service bans; ban writes in NS alone, and lift -all refuses to
// guess which of the two lists to empty. A service that sets its
// ban list apart is best given both variables. protectctl never publishes
// limits: it reads the ones the service published, so that inspect and
// explain show the numbers the service enforces.
//
// # Commands
//
//	bans [-json] [-within CIDR] [-source auto|manual] [-limit N]
//		List the active bans, soonest expiry first: key, source, reason,
//		who, created, expires, time left, offense. -within keeps the bans
//		inside a CIDR, -source the automatic or the manual ones, -limit
//		the first N. A record the store holds but cannot read is listed
//		with source "malformed" and what is wrong with it: it refuses
//		nothing, and lift deletes it.
//
//	ban [-for DURATION] [-permanent] [-reason TEXT] [-by WHO] [-force] [-json] TARGET...
//		Ban each TARGET. -for takes days (2d12h), from 1s to 36500d; the
//		default length is the services' BanDuration. A ban is permanent
//		only with -permanent, which excludes -for. A CIDR wider than a /8
//		of IPv4 or a /16 of IPv6 is banned only with -force. A reason
//		holds at most 1024 bytes.
//
//	lift [-all] [-force] [-by WHO] [-json] TARGET...
//		Lift the bans on each TARGET. A CIDR lifts every ban inside it,
//		key bans and range bans, itself included. A CIDR wider than a /8
//		or a /16 is lifted only with -force; every ban of the list only
//		with -all, which takes no TARGET.
//
//	inspect [-json] [-plans FILE [-plan NAME]] TARGET
//		Show the target's key, its count and the time until it is
//		forgotten, its ban and the range bans that cover it, its
//		offenses, and whether it is safe. For consumer:NAME, show each
//		stored limit of its plan: a quota's usage and reset, a rate's
//		backlog. -plans names the plans file protectd reads (a path, or
//		the JSON itself) [$HTTP_PROTECT_PLANS]; inspect then also says
//		what is left of each limit under each plan. -plan keeps one plan,
//		and lists its limits that nothing was charged to.
//
//	explain -remote ADDR [-H 'Name: value']... [-json]
//		Show who the client of a request from peer ADDR with these header
//		lines is, and which step of the pipeline decides it now. It is
//		Protector.Check: it counts and writes nothing.
//
//	check [-json] ADDR
//		Show every source that would refuse ADDR: the ban on its key and
//		the range bans containing it, in every ban list, with the time
//		each has left, and whether a safe network passes it first. Exit 0
//		when nothing refuses it (nothing holds it, or it is safe), 1 when
//		something does.
//
//	events [-follow] [-since DURATION] [-after CURSOR] [-json]
//		Print the journal of the service's ban list, oldest first: each
//		ban written, lift, ban that ended, allow, disallow and allowlist
//		entry that ended (allow-expire), with its time, target,
//		source, author, end and reason. -since keeps the events of the
//		last while (1h, 2d); -after those after the event with that
//		cursor (-json shows each event's). -follow goes on printing
//		events as they are written, until interrupted. -json writes one
//		record a line. A store that keeps no journal is an error.
//
//	allow [-for DURATION] [-reason TEXT] [-by WHO] [-json] TARGET...
//		Put each TARGET (an address, which allows its counting key, or a
//		CIDR) on the service's allowlist, for DURATION (default until
//		disallowed), and lift the bans it covers (they are named on
//		stderr). While the entry lasts its clients are safe on every
//		instance of the store: never counted, never banned, and a ban of
//		them is refused. -json writes {"allowed": [...], "lifted": [...]}.
//		A store that keeps no allowlist is an error.
//
//	allows [-json]
//		List the allowlist entries in force, as bans lists bans.
//
//	disallow [-json] TARGET...
//		Remove the allowlist entry on each TARGET; its clients are
//		counted again from the next request.
//
//	protectors [-json]
//		List the protectors: name, namespace, ban list, and the limits
//		published for the namespace (the protector's own settings, marked
//		"not published", before it published any).
//
//	nft sync [-sets 'FAMILY TABLE SET4 SET6'] [-create] [-json]
//		Make the nftables sets hold the bans in force, once, as
//		protectd's HTTP_PROTECT_NFT sink does continuously: for cron, or
//		for a host whose protectd runs elsewhere. Only what differs is
//		written, in one netlink transaction; an expired ban leaves the
//		kernel by its element's timeout. -sets names the sets
//		[$HTTP_PROTECT_NFT, or "inet protect ban4 ban6"]; a missing table
//		or set is an error that names it, unless -create makes it (not
//		the chain that drops: see docs/firewall.md). Needs CAP_NET_ADMIN.
//
//	version
//		Print protectctl's version and the Go version it was built with.
//
// A TARGET is an address, a CIDR, or consumer:NAME; anything else is an
// error before anything is written. Flags may follow the targets. -by
// defaults to user@host; ban stores it with the ban, and lift logs it. The
// library logs every ban and lift through log/slog, on stderr.
// "protectctl COMMAND -h" prints a command's flags with an example.
//
// # Output
//
// Data goes to stdout, messages to stderr. -json writes the records that
// docs/protectctl.md in the repository describes: stable (fields are only
// ever added), lists as [], never null, times in RFC 3339, UTC.
//
// Tables print every cell safe for a terminal: a reason, an author, a key
// or a header may hold whatever whoever wrote it chose, so control
// characters (C0, DEL, C1), bidirectional controls, line separators and
// invalid UTF-8 are shown as Go escapes (\n, \x1b, \u202e, \xff), and a
// backslash as \\. A hostile reason cannot forge a row, recolour the
// terminal or reorder text. A cell longer than 80 characters is cut, ending
// in "…". -json carries the text as stored, invalid UTF-8 as U+FFFD.
//
// # Exit status
//
// 0 on success; 1 on a failure, such as an unreachable store or admin API,
// which fails within a few seconds with a message that names its address,
// and for check, when something refuses the address; 2 on a usage error:
// bad flags, targets or environment, an unknown namespace, or no store
// given. Through -server the service checks what protectctl sends, and
// its answer exits as the same mistake made here would.
//
// # Examples
//
//	export HTTP_PROTECT_REDIS_URL=redis://redis.internal:6379/0
//	protectctl bans                                   # who is banned, why, for how long
//	protectctl bans -within 198.51.100.0/24 -source auto
//	protectctl ban -for 2d12h -reason scanner 198.51.100.0/24
//	protectctl lift 2001:db8:1:2::99                  # lifts 2001:db8:1:2::/64
//	protectctl inspect 203.0.113.7                    # key, counter, ban, offenses, safe or not
//	protectctl inspect -plans plans.json consumer:acme
//	protectctl explain -remote 10.0.0.1:5555 -H 'X-Forwarded-For: 6.6.6.6, 1.2.3.4'
//	protectctl check 203.0.113.7 || echo refused
//
//	protectctl -server unix:/run/protectd/admin.sock bans   # a service on the memory store
//	HTTP_PROTECT_ADMIN_TOKEN=$(cat /etc/protectd/token) protectctl -server http://10.0.0.7:8090 protectors
//
//	protectctl events -since 1h -follow               # what happened to bans, and what happens
//	protectctl allow -for 1h -reason 'load test' 203.0.113.7   # safe for an hour, its ban lifted
//	protectctl nft sync                               # the firewall's sets = the bans in force
package main
