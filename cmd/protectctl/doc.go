// Protectctl lists, adds and lifts the bans of services protected by
// protect, in the Redis they share, with the settings they use.
//
//	usage: protectctl [-redis URL] [-namespace NS] COMMAND [flags] [args]
//
// The store is -redis URL, or HTTP_PROTECT_REDIS_URL when -redis is not
// given. Every other setting comes from the same HTTP_PROTECT_* environment
// the services read (package envconfig), so protectctl aggregates and
// trusts addresses exactly as they do: lifting 2001:db8:1:2::99 lifts
// 2001:db8:1:2::/64. Run it with the services' environment. Like them it
// refuses an HTTP_PROTECT_* name it does not know, since a typo would apply
// a default; the names protectd reads (HTTP_PROTECT_LISTEN,
// HTTP_PROTECT_PLANS, HTTP_PROTECT_GRPC_LISTEN, HTTP_PROTECT_NFT,
// HTTP_PROTECT_NFT_INTERVAL, HTTP_PROTECT_LAPI_LISTEN,
// HTTP_PROTECT_LAPI_KEYS) are accepted.
//
// A service on the memory store keeps its bans inside its own process;
// protectctl reaches only bans kept in Redis.
//
// # Global flags
//
//	-redis URL
//		the Redis URL: redis://[user:password@]host:port[/db],
//		rediss://... (TLS) or unix:///path [$HTTP_PROTECT_REDIS_URL]
//	-namespace NS
//		the namespace of both the bans and the counters; without it the
//		ban list is $HTTP_PROTECT_BAN_NAMESPACE and the counters that
//		inspect shows are under $HTTP_PROTECT_NAMESPACE (both "protect:"
//		by default)
//
// Use -namespace for a service that keeps its bans and counters in one
// namespace; a service that sets them apart is inspected with the two
// variables instead. protectctl never publishes limits: it reads the ones
// the service published, so that inspect and explain show the numbers the
// service enforces.
//
// # Commands
//
//	bans [-json] [-within CIDR] [-source auto|manual] [-limit N]
//		List the active bans, soonest expiry first: key, source, reason,
//		who, created, expires, time left, offense. -within keeps the bans
//		inside a CIDR, -source the automatic or the manual ones, -limit
//		the first N.
//
//	ban [-for DURATION] [-permanent] [-reason TEXT] [-by WHO] [-force] [-json] TARGET...
//		Ban each TARGET. -for takes days (2d12h), from 1s to 36500d; the
//		default length is the services' BanDuration. A ban is permanent
//		only with -permanent, which excludes -for. A CIDR wider than a /8
//		of IPv4 or a /16 of IPv6 is banned only with -force.
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
// terminal or reorder text. -json carries the text as stored, invalid
// UTF-8 as U+FFFD.
//
// # Exit status
//
// 0 on success; 1 on a failure, such as an unreachable store, which fails
// within a few seconds with a message that names its address; 2 on a
// usage error: bad flags, targets or environment, or no store given.
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
//	protectctl nft sync                               # the firewall's sets = the bans in force
package main
