package envconfig

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/redisstore"
)

// Prefix is the prefix of the variables Read reads by default.
const Prefix = "HTTP_PROTECT_"

// maxEnvStoreTimeout bounds HTTP_PROTECT_STORE_TIMEOUT. A bare number is
// seconds in every duration variable (the Node package's rule for TTL), so
// STORE_TIMEOUT=100 written for 100 ms would hold every request for 100 s
// while the store is down. No store call should take longer than this; a
// longer value is refused with a hint instead of being believed.
const maxEnvStoreTimeout = 10 * time.Second

// envVar is one variable Read reads: its name after the prefix
// and how it sets its field.
type envVar struct {
	name  string
	field string // the Config field it sets, as protect.ConfigError names it
	set   func(c *settings, v string) error
}

// errEnvValue carries what a value should look like; the caller quotes
// the variable and its value around it.
type errEnvValue string

func (e errEnvValue) Error() string { return string(e) }

func envDuration(field func(*settings) *time.Duration) func(*settings, string) error {
	return func(c *settings, v string) error {
		d, err := EnvDuration(v)
		if err != nil {
			return err
		}
		*field(c) = d
		return nil
	}
}

func envInt(field func(*settings) *int64) func(*settings, string) error {
	return func(c *settings, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return errEnvValue("want an integer")
		}
		*field(c) = n
		return nil
	}
}

func envSmall(field func(*settings) *int) func(*settings, string) error {
	return func(c *settings, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return errEnvValue("want an integer")
		}
		*field(c) = int(n)
		return nil
	}
}

func envBool(field func(*settings) *bool) func(*settings, string) error {
	return func(c *settings, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errEnvValue("want true or false")
		}
		*field(c) = b
		return nil
	}
}

func envString(field func(*settings) *string) func(*settings, string) error {
	return func(c *settings, v string) error { *field(c) = v; return nil }
}

// envPositive is envDuration for a variable whose zero would be the
// default in Go: written out in the environment, 0 is surely a mistake
// (TTL=0 is no TTL), so it is refused rather than silently made 10s.
func envPositive(field func(*settings) *time.Duration) func(*settings, string) error {
	set := envDuration(field)
	return func(c *settings, v string) error {
		if err := set(c, v); err != nil {
			return err
		}
		if *field(c) == 0 {
			return errEnvValue("0 is not a duration this setting can have: unset it for the default")
		}
		return nil
	}
}

// envNonZero refuses an explicit 0 where 0 in Go means the default.
func envNonZero(want string, set func(*settings, string) error) func(*settings, string) error {
	return func(c *settings, v string) error {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n == 0 {
			return errEnvValue("0: want " + want + "; unset it for the default")
		}
		return set(c, v)
	}
}

// envNetList reads TRUSTED_PROXIES or SAFE_NETWORKS. "none" is the empty
// list, said out loud (protectd refuses to start without trusted proxies
// unless told none). An entry that covers a whole address family
// (0.0.0.0/0, ::/0, ::ffff:0:0/96) trusts every peer's headers, or lets
// every client pass as safe; it is refused unless written with a leading
// "!" ("!0.0.0.0/0"), which says it was meant.
func envNetList(field func(*settings) *[]string) func(*settings, string) error {
	return func(c *settings, v string) error {
		list := []string{}
		if strings.EqualFold(v, "none") {
			*field(c) = list
			return nil
		}
		for _, e := range strings.Split(v, ",") {
			e = strings.TrimSpace(e)
			meant := false
			if rest, ok := strings.CutPrefix(e, "!"); ok {
				e, meant = strings.TrimSpace(rest), true
			}
			if wholeFamily(e) && !meant {
				return errEnvValue(fmt.Sprintf("%s covers every address of its family; write !%s if that is meant", e, e))
			}
			list = append(list, e)
		}
		*field(c) = list
		return nil
	}
}

// wholeFamily says whether e is a CIDR that covers every IPv4 or every
// IPv6 address.
func wholeFamily(e string) bool {
	p, err := netip.ParsePrefix(e)
	if err != nil {
		return false
	}
	if p.Addr().Is4In6() && p.Bits() <= 96 {
		return p.Bits() == 96 || p.Bits() == 0
	}
	return p.Bits() == 0
}

// envVars lists every variable Read reads, in the order of the
// Config fields. The first three are the names @imqueue/http-protect
// reads.
var envVars = append([]envVar{
	{"TTL", "TTL", envPositive(func(c *settings) *time.Duration { return &c.TTL })},
	{"MAX_REQUESTS", "MaxRequests", envNonZero("a count of at least 1", envInt(func(c *settings) *int64 { return &c.MaxRequests }))},
	{"BAN_LIMIT", "BanLimit", envNonZero("a count of at least 1, or -1 to turn bans off", envInt(func(c *settings) *int64 { return &c.BanLimit }))},
	{"REDIS_URL", "", envString(func(c *settings) *string { return &c.redisURL })},
	{"BAN_DURATION", "BanDuration", envPositive(func(c *settings) *time.Duration { return &c.BanDuration })},
	{"BAN_FACTOR", "BanFactor", func(c *settings, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return errEnvValue("want a number")
		}
		if f == 0 {
			return errEnvValue("0 is no factor: want a number of at least 1 (unset, it is 2)")
		}
		c.BanFactor = f
		return nil
	}},
	{"MAX_BAN_DURATION", "MaxBanDuration", envPositive(func(c *settings) *time.Duration { return &c.MaxBanDuration })},
	{"OFFENSE_WINDOW", "OffenseWindow", envPositive(func(c *settings) *time.Duration { return &c.OffenseWindow })},
	{"TRUSTED_PROXIES", "TrustedProxies", envNetList(func(c *settings) *[]string { return &c.TrustedProxies })},
	{"PROXY_HEADER", "ProxyHeader", envString(func(c *settings) *string { return &c.ProxyHeader })},
	{"PROXY_COUNT", "ProxyCount", envSmall(func(c *settings) *int { return &c.ProxyCount })},
	{"TRUST_UNIX_SOCKET", "TrustUnixSocket", envBool(func(c *settings) *bool { return &c.TrustUnixSocket })},
	{"IPV4_PREFIX", "IPv4Prefix", envNonZero("a prefix length from 1 to 32", envSmall(func(c *settings) *int { return &c.IPv4Prefix }))},
	{"IPV6_PREFIX", "IPv6Prefix", envNonZero("a prefix length from 1 to 128", envSmall(func(c *settings) *int { return &c.IPv6Prefix }))},
	{"ESCALATION_THRESHOLD", "EscalationThreshold", envSmall(func(c *settings) *int { return &c.EscalationThreshold })},
	{"IPV6_ESCALATION", "IPv6Escalation", envLevels(func(c *settings) *[]int { return &c.IPv6Escalation })},
	{"IPV4_ESCALATION", "IPv4Escalation", envLevels(func(c *settings) *[]int { return &c.IPv4Escalation })},
	{"SAFE_NETWORKS", "SafeNetworks", envNetList(func(c *settings) *[]string { return &c.SafeNetworks })},
	{"BLOCKLIST_DIR", "", envString(func(c *settings) *string { return &c.blockListDir })}, // before BLOCKLISTS, which reads it
	{"BLOCKLISTS", "BlockLists", envBlockLists},
	{"NAMESPACE", "Namespace", envString(func(c *settings) *string { return &c.Namespace })},
	{"BAN_NAMESPACE", "BanNamespace", envString(func(c *settings) *string { return &c.BanNamespace })},
	{"NAME", "Name", envString(func(c *settings) *string { return &c.Name })},
	{"ON_STORE_ERROR", "OnStoreError", func(c *settings, v string) error {
		p, err := protect.ParseFailurePolicy(v)
		if err != nil {
			return errEnvValue("want local, open or closed")
		}
		c.OnStoreError = p
		return nil
	}},
	{"STORE_TIMEOUT", "StoreTimeout", func(c *settings, v string) error {
		d, err := EnvDuration(v)
		if err != nil {
			return err
		}
		if d < time.Millisecond {
			return errEnvValue("want at least 1ms: no store call finishes sooner, so every request would be decided by ON_STORE_ERROR")
		}
		if d > maxEnvStoreTimeout {
			msg := fmt.Sprintf("%v is longer than a store call may take (at most %v)", d, maxEnvStoreTimeout)
			if bareNumber(v) {
				msg += fmt.Sprintf("; a bare number is seconds: did you mean %sms?", v)
			}
			return errEnvValue(msg)
		}
		c.StoreTimeout = d
		return nil
	}},
	{"DRY_RUN", "DryRun", envBool(func(c *settings) *bool { return &c.DryRun })},
	{"BAN_STATUS", "BanStatus", envNonZero("a 4xx or 5xx status", envSmall(func(c *settings) *int { return &c.BanStatus }))},
	{"UNKNOWN_STATUS", "UnknownStatus", envNonZero("a 4xx or 5xx status", envSmall(func(c *settings) *int { return &c.UnknownStatus }))},
	{"STATE_FILE", "", envString(func(c *settings) *string { return &c.stateFile })},
	{"REDIS_WAIT_REPLICAS", "", envWaitReplicas}, // redis_wait.go
	{"REDIS_WAIT_TIMEOUT", "", envWaitTimeout},
}, challengeVars...) // challenge.go

// Names returns the names, without a prefix, of every variable
// Read reads ("TTL", "MAX_REQUESTS", ...), for a program's help
// text.
func Names() []string {
	names := make([]string, len(envVars))
	for i, v := range envVars {
		names[i] = v.name
	}
	return names
}

// FromEnv reads a Config from the HTTP_PROTECT_* variables of the
// process environment; own names the variables under HTTP_PROTECT_
// that the program reads itself. It is
// Read(os.Environ(), Options{Own: own}).
func FromEnv(own ...string) (protect.Config, error) {
	return Read(os.Environ(), Options{Own: own})
}

// Options configure Read. The zero value reads the HTTP_PROTECT_
// variables and declares no names of the program's own.
type Options struct {
	// Prefix is the variables' prefix [Prefix]. A second protector is
	// configured from a second prefix: "HTTP_PROTECT_LOGIN_" reads
	// HTTP_PROTECT_LOGIN_MAX_REQUESTS and so on.
	Prefix string
	// Own names the further variables under the prefix that the program
	// reads itself, without the prefix ("LISTEN", "PLANS"), so that they
	// are not rejected. An entry ending in "*" accepts every name that
	// starts with it: a service that also reads HTTP_PROTECT_LOGIN_
	// declares "LOGIN_*" when it reads HTTP_PROTECT_.
	Own []string
	// RedisURL, when set, is used in place of the REDIS_URL variable: a
	// command-line flag, say.
	RedisURL string
	// Redis configures the store dialed from the Redis URL.
	Redis redisstore.Options
	// Memory configures the memory store opened on the STATE_FILE
	// variable's file (which is its Path).
	Memory protect.MemoryOptions
}

// Read reads a Config from environ, a list of NAME=value lines as
// os.Environ returns them, under opts.Prefix: a program passes
// os.Environ(), a test its own list, and needs no global state. A nil
// environ reads nothing: the zero Config.
//
// It reads HTTP_PROTECT_TTL, HTTP_PROTECT_MAX_REQUESTS and
// HTTP_PROTECT_BAN_LIMIT (the names @imqueue/http-protect, the Node
// package, reads), and HTTP_PROTECT_<FIELD> for the rest: REDIS_URL,
// BAN_DURATION, BAN_FACTOR, MAX_BAN_DURATION, OFFENSE_WINDOW,
// TRUSTED_PROXIES and SAFE_NETWORKS (comma-separated), PROXY_HEADER,
// PROXY_COUNT, TRUST_UNIX_SOCKET, IPV4_PREFIX, IPV6_PREFIX,
// ESCALATION_THRESHOLD, IPV6_ESCALATION and IPV4_ESCALATION (prefix
// lengths such as "56,48", or "none"), NAMESPACE, BAN_NAMESPACE, NAME,
// ON_STORE_ERROR (local, open, closed), STORE_TIMEOUT, DRY_RUN,
// BAN_STATUS, UNKNOWN_STATUS, STATE_FILE (a memory store's state file),
// REDIS_WAIT_REPLICAS and REDIS_WAIT_TIMEOUT (redisstore's
// Options.WaitReplicas and WaitTimeout), and the challenge's CHALLENGE
// (true or false), CHALLENGE_AFTER, CHALLENGE_SECRET (16 bytes or more,
// the same on every instance), CHALLENGE_DIFFICULTY and
// CHALLENGE_PASS_TTL, any of which turns Config.Challenge on.
//
// It is strict, because a typo that silently applies a default is a
// limit nobody set:
//
//   - A variable under the prefix that is neither a known name nor in
//     opts.Own is an error that names it and suggests the nearest known
//     name (HTTP_PROTECT_MAX_REQUEST: "did you mean
//     HTTP_PROTECT_MAX_REQUESTS?").
//   - A value that does not parse is an error that quotes it, never a
//     silent default. Every problem is reported at once (errors.Join);
//     each wraps ErrConfig.
//   - What protect.New would refuse is refused here, under the
//     variable's name and value (HTTP_PROTECT_BAN_FACTOR="0.5"), never
//     the Go field's (see protect.Config.Validate).
//   - An explicit 0 where 0 in Go means the default (TTL=0,
//     MAX_REQUESTS=0) is an error, not a silent default; so is
//     STORE_TIMEOUT under 1ms.
//   - TRUSTED_PROXIES and SAFE_NETWORKS take "none" for an empty list,
//     and refuse an entry that covers a whole address family
//     ("0.0.0.0/0", "::/0") unless it is written with a leading "!"
//     ("!0.0.0.0/0"), which says it was meant.
//   - Every duration variable takes one syntax: a Go duration with days
//     ("90s", "15m", "2d12h", "100ms"; see ParseDuration), or a bare
//     number, which is seconds ("3600", "0.5"), as the Node package reads
//     HTTP_PROTECT_TTL. Because of that rule STORE_TIMEOUT above 10s is
//     refused: STORE_TIMEOUT=100 would mean 100 seconds, not the 100 ms
//     it was surely meant to be.
//
// Unset and empty variables leave their field zero, so New applies its
// default. The prefix must be, as environment names are, upper-case
// letters, digits and underscores.
//
// When a Redis URL is set (the REDIS_URL variable, or opts.RedisURL),
// the Config's Store is a *redisstore.Store dialed from it with
// opts.Redis: give it to every protector of the service, and close it
// after them. Dialing checks the URL and makes one round trip (see
// redisstore.Dial): a URL of the wrong topology for its server is an
// error. When STATE_FILE is set instead, the Store is a
// *protect.MemoryStore opened on that file (protect.OpenMemoryStore)
// with opts.Memory, which keeps bans and plan state across restarts:
// the caller closes it too. Both set is an error.
func Read(environ []string, opts Options) (protect.Config, error) {
	prefix := opts.Prefix
	if prefix == "" {
		prefix = Prefix
	}
	if err := checkEnvPrefix(prefix); err != nil {
		return protect.Config{}, err
	}
	vars := make(map[string]string)
	for _, kv := range environ {
		// On Windows, os.Environ holds entries such as "=C:=C:\"; their
		// name is empty here, and never under a prefix.
		name, v, _ := strings.Cut(kv, "=")
		if name, ok := strings.CutPrefix(name, prefix); ok {
			vars[name] = v
		}
	}
	return configFromVars(prefix, vars, opts)
}

// configFromVars sets a Config from vars, the variables under prefix by
// their names after it; the names left over that opts.Own does not
// declare are errors.
func configFromVars(prefix string, vars map[string]string, opts Options) (protect.Config, error) {
	own := opts.Own
	vars0 := maps.Clone(vars)
	var c settings
	var errs []error
	for _, ev := range envVars {
		v, ok := vars[ev.name]
		delete(vars, ev.name)
		v = strings.TrimSpace(v)
		if !ok || v == "" {
			continue
		}
		if err := ev.set(&c, v); err != nil {
			errs = append(errs, configErr("%s%s=%s: %v", prefix, ev.name, shown(ev.name, v), err))
		}
	}
	unknown := make([]string, 0, len(vars))
	for name := range vars {
		if !envOwn(name, own) {
			unknown = append(unknown, name)
		}
	}
	// Sorted, so the message is the same from one run to the next.
	slices.Sort(unknown)
	for _, name := range unknown {
		msg := fmt.Sprintf("%s%s: not a setting", prefix, name)
		if sub := subPrefix(name); sub != "" {
			// Not a typo: a setting read under a longer prefix. Naming
			// the nearest setting of this prefix would send the user to
			// change the wrong protector's limit.
			msg += fmt.Sprintf("; if a second protector reads %s%s, declare %q", prefix, sub, sub+"*")
		} else if near := nearestEnvName(name, own); near != "" {
			msg += fmt.Sprintf("; did you mean %s%s?", prefix, near)
		}
		errs = append(errs, configErr("%s (a name your program reads itself is declared in Options.Own, or to FromEnv)", msg))
	}
	errs = append(errs, validate(prefix, c.Config, vars0)...)
	errs = append(errs, redisWaitErrors(prefix, &c, vars0, opts)...)
	errs = append(errs, challengeErrors(prefix, &c, vars0)...)
	if opts.RedisURL != "" {
		c.redisURL = opts.RedisURL
	}
	if c.redisURL != "" && c.stateFile != "" {
		errs = append(errs, configErr("%sSTATE_FILE and %sREDIS_URL are both set: the state file keeps one process's memory store, Redis is shared by every instance; set one", prefix, prefix))
	} else if c.redisURL != "" {
		// Dialed beside the other mistakes, so that a bad URL is
		// reported with them, not after they are fixed.
		store, err := redisstore.Dial(c.redisURL, c.redisWait.redisOptions(opts.Redis))
		if err != nil {
			// Dial's error quotes the URL with its password redacted;
			// never quote it here.
			errs = append(errs, configErr("%sREDIS_URL: %w", prefix, err))
		} else if len(errs) > 0 {
			store.Close()
		} else {
			c.Store = store
		}
	}
	if len(errs) > 0 {
		return protect.Config{}, errors.Join(errs...)
	}
	if c.stateFile != "" {
		store, err := openStateFile(prefix, c.stateFile, opts.Memory)
		if err != nil {
			return protect.Config{}, err
		}
		c.Store = store
	}
	return c.Config, nil
}

// settings is what the variables set: a Config, and the URL of the Redis
// store to dial once every variable has parsed.
type settings struct {
	protect.Config
	redisURL     string
	stateFile    string
	blockListDir string // where URL lists keep their last good copy (blocklists.go)
	// REDIS_WAIT_REPLICAS and REDIS_WAIT_TIMEOUT (redis_wait.go)
	redisWait redisWait
	// challengeOff: CHALLENGE=false (challenge.go)
	challengeOff bool
}

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{protect.ErrConfig}, args...)...)
}

func checkEnvPrefix(prefix string) error {
	for i := 0; i < len(prefix); i++ {
		b := prefix[i]
		if !('A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_') {
			return configErr("environment prefix %q: want upper-case letters, digits and _", prefix)
		}
	}
	return nil
}

// envOwn says whether the program declared name as its own.
func envOwn(name string, own []string) bool {
	for _, o := range own {
		if p, ok := strings.CutSuffix(o, "*"); ok {
			if strings.HasPrefix(name, p) {
				return true
			}
		} else if name == o {
			return true
		}
	}
	return false
}

// subPrefix returns the part of name before a known setting's name
// ("LOGIN_" of "LOGIN_MAX_REQUESTS"), or "" when name does not end in
// "_" and a setting's name.
func subPrefix(name string) string {
	sub := ""
	for _, ev := range envVars {
		if p, ok := strings.CutSuffix(name, "_"+ev.name); ok && p != "" && (sub == "" || len(p)+1 < len(sub)) {
			sub = p + "_" // the longest setting name wins: LOGIN_ of LOGIN_BAN_LIMIT, not LOGIN_BAN_
		}
	}
	return sub
}

// nearestEnvName returns the known or declared name closest to name, or
// "" when none is close enough to be the one meant.
func nearestEnvName(name string, own []string) string {
	best, bestDist := "", len(name)/3+2
	try := func(cand string) {
		if d := editDistance(name, cand); d < bestDist {
			best, bestDist = cand, d
		}
	}
	for _, ev := range envVars {
		try(ev.name)
	}
	for _, o := range own {
		if !strings.HasSuffix(o, "*") {
			try(o)
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// EnvDuration reads a duration as every variable of the environment is
// read: a bare non-negative number is seconds ("90", "0.5"), anything
// else is ParseDuration's ("90s", "2d12h"); a negative one is an error.
// A program reads its own variables with it (protectd's
// HTTP_PROTECT_CROWDSEC_INTERVAL and _NFT_INTERVAL), so that one syntax
// holds for every variable it takes.
func EnvDuration(v string) (time.Duration, error) {
	if bareNumber(v) {
		d, err := time.ParseDuration(v + "s")
		if err != nil {
			return 0, errEnvValue("too long")
		}
		return d, nil
	}
	d, err := ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errEnvValue("want a duration such as 90s, 15m, 2d12h, or a bare number of seconds")
	}
	return d, nil
}

// bareNumber says whether v is digits with at most one '.', and at least
// one digit: what EnvDuration reads as seconds. (strconv.ParseFloat
// would also take "1e3", "Inf" and "0x10".)
func bareNumber(v string) bool {
	digits, dots := 0, 0
	for i := 0; i < len(v); i++ {
		switch {
		case '0' <= v[i] && v[i] <= '9':
			digits++
		case v[i] == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// ParseDuration is time.ParseDuration with days: "2d12h", "7d", "90s".
// A day is 24 hours.
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("protect: empty duration")
	}
	var days int64
	rest := s
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || n < 0 || n > int64(math.MaxInt64/(24*time.Hour)) {
			return 0, fmt.Errorf("protect: duration %q: bad number of days", s)
		}
		days, rest = n, s[i+1:]
	}
	var d time.Duration
	if rest != "" {
		var err error
		if d, err = time.ParseDuration(rest); err != nil {
			return 0, fmt.Errorf("protect: duration %q: want e.g. 90s, 15m, 2d12h", s)
		}
		if d < 0 && days > 0 {
			return 0, fmt.Errorf("protect: duration %q: mixed signs", s)
		}
	}
	total := time.Duration(days) * 24 * time.Hour
	if d > 0 && total > math.MaxInt64-d {
		return 0, fmt.Errorf("protect: duration %q: too long", s)
	}
	return total + d, nil
}

// parseLevels reads an escalation list from the environment: prefix
// lengths separated by commas ("56,48"), or "none".
func parseLevels(v string) ([]int, error) {
	if strings.EqualFold(v, "none") {
		return []int{}, nil
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(f), "/")))
		if err != nil {
			return nil, errEnvValue("want prefix lengths such as 56,48, or none")
		}
		out = append(out, n)
	}
	return slices.Clip(out), nil
}

func envLevels(field func(*settings) *[]int) func(*settings, string) error {
	return func(c *settings, v string) error {
		l, err := parseLevels(v)
		if err != nil {
			return err
		}
		*field(c) = l
		return nil
	}
}

// validate reports what protect.Config.Validate finds in c under the
// variables' names, with their values as written (vars, by name after
// the prefix): "HTTP_PROTECT_BAN_FACTOR="0.5": must be a number of at
// least 1", never the Go field's name. A problem with a field no
// variable set says which default it is.
func validate(prefix string, c protect.Config, vars map[string]string) []error {
	err := c.Validate()
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range configErrors(err) {
		ce, ok := e.(*protect.ConfigError)
		ev := envByField(ce)
		if !ok || ev == nil {
			out = append(out, e)
			continue
		}
		name := prefix + ev.name
		reason := goNames.ReplaceAllStringFunc(ce.Reason, func(f string) string {
			if ev := envByField(&protect.ConfigError{Field: f}); ev != nil {
				return prefix + ev.name
			}
			return f
		})
		if v := strings.TrimSpace(vars[ev.name]); v != "" {
			out = append(out, configErr("%s=%s: %s", name, shown(ev.name, v), reason))
		} else {
			out = append(out, configErr("%s (unset, so %s): %s", name, ce.Value, reason))
		}
	}
	return out
}

// goNames matches the Config field names a reason may mention.
var goNames = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]+\b`)

// configErrors flattens a tree of joined errors down to its
// *protect.ConfigError leaves (and any other leaf).
func configErrors(err error) []error {
	if _, ok := err.(*protect.ConfigError); ok {
		return []error{err}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, configErrors(e)...)
		}
		return out
	}
	return []error{err}
}

// envByField returns the variable that sets ce's field, or nil.
func envByField(ce *protect.ConfigError) *envVar {
	if ce == nil || ce.Field == "" {
		return nil
	}
	for i := range envVars {
		if envVars[i].field == ce.Field {
			return &envVars[i]
		}
	}
	return nil
}
