// Package envconfig reads a protect.Config from HTTP_PROTECT_* environment
// variables, strictly, for programs configured by their environment
// (protectd, protectctl, twelve-factor services).
//
// It reads HTTP_PROTECT_TTL, HTTP_PROTECT_MAX_REQUESTS and
// HTTP_PROTECT_BAN_LIMIT (the names @imqueue/http-protect, the Node
// package, reads), and HTTP_PROTECT_<FIELD> for the rest of the fields a
// variable can set:
//
//	REDIS_URL             the Store: a redisstore.Store dialed from it (see redisstore.Dial)
//	BAN_DURATION, BAN_FACTOR, MAX_BAN_DURATION, OFFENSE_WINDOW
//	TRUSTED_PROXIES, SAFE_NETWORKS   comma-separated CIDRs or addresses
//	PROXY_HEADER, PROXY_COUNT, TRUST_UNIX_SOCKET
//	IPV4_PREFIX, IPV6_PREFIX
//	ESCALATION_THRESHOLD, IPV6_ESCALATION, IPV4_ESCALATION   ("56,48", or "none")
//	NAMESPACE, BAN_NAMESPACE, NAME
//	ON_STORE_ERROR        local, open or closed
//	STORE_TIMEOUT         at most 10s
//	DRY_RUN, BAN_STATUS, UNKNOWN_STATUS
//	CHALLENGE, CHALLENGE_AFTER, CHALLENGE_SECRET, CHALLENGE_DIFFICULTY, CHALLENGE_PASS_TTL
//	                      Config.Challenge, on when any is set (CHALLENGE=true alone: the defaults)
//
// Names lists them. A duration is a Go duration with days ("90s", "2d12h";
// ParseDuration) or a bare number of seconds. A name under the prefix
// that is not a setting, and a value that does not parse, are errors that
// quote them and wrap protect.ErrConfig; unset and empty variables leave
// the field zero, for protect.New's default. A program declares the
// names it reads itself under the prefix ("LISTEN", "PLANS", or "LOGIN_*"
// for a second prefix).
//
// Read reads a list of NAME=value lines (os.Environ(), or a test's own)
// with every choice in Options: the prefix (a second protector's,
// "HTTP_PROTECT_LOGIN_"), the program's own names, a Redis URL in place
// of the variable, and the options of the store it dials or opens.
// FromEnv(own...) is Read of the process environment under Prefix. A store dialed from a URL is the caller's:
// give it to every protector of the service and close it after them.
//
// ParsePlans and LoadPlans read the plans file of HTTP_PROTECT_PLANS (a
// path, or the JSON itself), as protectd and protectctl do.
package envconfig
