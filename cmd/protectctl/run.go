package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/envconfig"
	"github.com/httpprotect/protect/redisstore"
	"github.com/httpprotect/protect/store"
	"github.com/redis/go-redis/v9"
)

const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// mainUsage is what a mistake in the global flags prints, on stderr; -h
// prints the manual (doc.go) instead.
const mainUsage = `usage: protectctl [-redis URL] [-server URL [-token TOKEN]] [-namespace NS] COMMAND [flags] [args]

commands: bans, ban, lift, allow, allows, disallow, events, inspect, explain, check,
protectors, nft, version.
"protectctl -h" prints the manual; "protectctl COMMAND -h" a command's flags.

global flags:
`

// usageError is a mistake in the command line: exit 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// cli is one invocation.
type cli struct {
	stdout, stderr   io.Writer
	redisURL, ns     string
	serverURL, token string
	svc              backend
	closers          []func() error // run in order when the command ends
}

// command is one subcommand: its flags, its usage text and what it does
// once the store is open. needsStore is false for version.
type command struct {
	usage, example string
	flags          func(fs *flag.FlagSet) func(c *cli, args []string) error
	needsStore     bool
}

var commands = map[string]command{
	"bans":       {"bans [-json] [-within CIDR] [-source auto|manual] [-limit N]", "protectctl bans -within 198.51.100.0/24 -source auto", bansCmd, true},
	"ban":        {"ban [-for DURATION] [-permanent] [-reason TEXT] [-by WHO] [-force] [-json] TARGET...", "protectctl ban -for 2d12h -reason 'credential stuffing' 198.51.100.0/24", banCmd, true},
	"lift":       {"lift [-all] [-force] [-by WHO] [-json] TARGET...", "protectctl lift 2001:db8:1:2::99   # lifts 2001:db8:1:2::/64", liftCmd, true},
	"inspect":    {"inspect [-json] [-plans FILE [-plan NAME]] TARGET", "protectctl inspect -plans plans.json consumer:acme", inspectCmd, true},
	"explain":    {"explain -remote ADDR [-H 'Name: value']... [-json]", "protectctl explain -remote 10.0.0.1:5555 -H 'X-Forwarded-For: 6.6.6.6, 1.2.3.4'", explainCmd, true},
	"check":      {"check [-json] ADDR", "protectctl check 203.0.113.7   # exit 1 when something refuses it", checkCmd, true},
	"protectors": {"protectors [-json]", "protectctl protectors -json", protectorsCmd, true},
	"events":     {"events [-follow] [-since DURATION] [-after CURSOR] [-json]", "protectctl events -since 1h -follow", eventsCmd, true},
	"allow":      {"allow [-for DURATION] [-reason TEXT] [-by WHO] [-json] TARGET...", "protectctl allow -for 1h -reason 'load test' 203.0.113.7", allowCmd, true},
	"allows":     {"allows [-json]", "protectctl allows -json", allowsCmd, true},
	"disallow":   {"disallow [-json] TARGET...", "protectctl disallow 203.0.113.7", disallowCmd, true},
	"version":    {"version", "protectctl version", versionCmd, false},
	"nft":        {"nft sync [-sets 'FAMILY TABLE SET4 SET6'] [-create] [-json]", "protectctl nft sync -sets 'inet protect ban4 ban6'", nftCmd, true},
}

// run is protectctl: main only calls it. Tests drive it in-process.
func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	// go-redis logs dial failures through a process-wide logger; the error
	// this command prints already says it, once.
	redis.SetLogger(quietLogger{})
	fs := flag.NewFlagSet("protectctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.redisURL, "redis", "", "Redis URL (default $HTTP_PROTECT_REDIS_URL)")
	fs.StringVar(&c.ns, "namespace", "", "the namespace of bans and counters (default $HTTP_PROTECT_BAN_NAMESPACE and $HTTP_PROTECT_NAMESPACE, or protect:)")
	fs.StringVar(&c.serverURL, "server", "", "a running service's admin API: http://host:port or unix:/path (default $HTTP_PROTECT_ADMIN_URL)")
	fs.StringVar(&c.token, "token", "", "the admin API's bearer token (default $HTTP_PROTECT_ADMIN_TOKEN)")
	// The flag package calls Usage itself before Parse returns, to the
	// FlagSet's output: with -h that printed the usage twice, once to
	// stderr. Usage is printed here instead, once: the manual on stdout
	// when asked for, the short usage on stderr after a mistake.
	fs.Usage = func() {}
	usage := func(w io.Writer) {
		fs.SetOutput(w)
		fmt.Fprint(w, mainUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, manual)
			return exitOK
		}
		usage(stderr)
		return exitUsage
	}
	if fs.NArg() == 0 {
		usage(stderr)
		return exitUsage
	}
	name := fs.Arg(0)
	if name == "help" {
		fmt.Fprint(stdout, manual)
		return exitOK
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "protectctl: unknown command %q (see protectctl -h)\n", name)
		return exitUsage
	}
	cfs := flag.NewFlagSet("protectctl "+name, flag.ContinueOnError)
	cfs.SetOutput(stderr)
	cfs.Usage = func() {}
	cmdUsage := func(w io.Writer) {
		cfs.SetOutput(w)
		fmt.Fprintf(w, "usage: protectctl %s\n\nexample:\n  %s\n\nflags:\n", cmd.usage, cmd.example)
		cfs.PrintDefaults()
	}
	do := cmd.flags(cfs)
	cmdArgs, err := parseInterspersed(cfs, fs.Args()[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cmdUsage(stdout)
			return exitOK
		}
		cmdUsage(stderr)
		return exitUsage
	}
	if cmd.needsStore {
		if err := c.open(); err != nil {
			return c.fail(err)
		}
		defer func() {
			for _, close := range c.closers {
				close()
			}
		}()
	}
	return c.fail(do(c, cmdArgs))
}

// parseInterspersed parses flags wherever they stand among the arguments,
// as operators type them ("inspect 203.0.113.7 -json"); "--" ends flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// fail reports err and returns the exit status it deserves.
func (c *cli) fail(err error) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, errRefused) { // check: the report on stdout says it
		return exitFailure
	}
	fmt.Fprintln(c.stderr, "protectctl:", err)
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, protect.ErrReasonTooLong) || errors.Is(err, admin.ErrBadRequest) || errors.Is(err, admin.ErrUnknownNamespace) || errors.Is(err, protect.ErrBadTarget) || errors.Is(err, protect.ErrWideTarget) || errors.Is(err, admin.ErrNoTarget) || errors.Is(err, protect.ErrConfig) {
		return exitUsage
	}
	return exitFailure
}

// Variables protectctl reads itself, beside the services' settings.
const (
	envAdminURL   = envconfig.Prefix + "ADMIN_URL"
	envAdminToken = envconfig.Prefix + "ADMIN_TOKEN"
	envNamespace  = envconfig.Prefix + "NAMESPACE"
)

// open finds where the commands run: a service's admin API (-server, or
// HTTP_PROTECT_ADMIN_URL when no -redis is given), or the Redis the
// services share.
func (c *cli) open() error {
	if c.serverURL != "" && c.redisURL != "" {
		return usagef("-server and -redis exclude each other")
	}
	server := c.serverURL
	if server == "" && c.redisURL == "" {
		server = os.Getenv(envAdminURL)
	}
	if server == "" {
		return c.openRedis()
	}
	token, from := c.token, "-token"
	if token == "" {
		token, from = os.Getenv(envAdminToken), envAdminToken
	}
	// A blank token is a mistake: sent, it is refused, and a server
	// that took it would take any request.
	if _, set := os.LookupEnv(envAdminToken); strings.TrimSpace(token) == "" && (token != "" || (from == envAdminToken && set)) {
		return usagef("%s is set but blank: give the admin API's token, or unset it", from)
	}
	r, err := newRemote(server, token, c.ns)
	if err != nil {
		return err
	}
	c.svc = r
	return nil
}

// openRedis connects to the store with the services' settings and checks
// that it answers, within a few seconds. It covers the namespace that
// -namespace or HTTP_PROTECT_NAMESPACE names; without either, every
// namespace published in the store (several protectors of a service each
// publish their own), or protect: when none is.
func (c *cli) openRedis() error {
	// protectctl runs in the services' environment, which also holds the
	// names protectd reads itself: declare them, so that only a typo is
	// refused.
	logger := slog.New(slog.NewTextHandler(c.stderr, nil))
	env, stateFile := withoutStateFile(os.Environ())
	cfg, err := envconfig.Read(env, envconfig.Options{
		Own:      []string{"LISTEN", "PLANS", "GRPC_LISTEN", "ADMIN_LISTEN", "ADMIN_TOKEN", "ADMIN_ORIGINS", "ADMIN_URL", "NFT", "NFT_INTERVAL", "LAPI_LISTEN", "LAPI_KEYS", "LAPI_BLOCKLISTS", "CROWDSEC_URL", "CROWDSEC_KEY", "CROWDSEC_INTERVAL"},
		RedisURL: c.redisURL,
		// A short-lived tool: no background refresh, no cached answers.
		Redis: redisstore.Options{RangeRefresh: -1, BanCacheTTL: -1, Logger: logger},
	})
	if err != nil {
		if errors.Is(err, redisstore.ErrURL) {
			return usageError{err}
		}
		return err
	}
	rs, ok := cfg.Store.(*redisstore.Store)
	if !ok && stateFile != "" {
		return stateFileError(stateFile)
	}
	if !ok {
		return usagef("no store: give -redis URL or set HTTP_PROTECT_REDIS_URL (or -server URL for a service's admin API)")
	}
	c.closers = append(c.closers, rs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rs.Ping(ctx); err != nil {
		return fmt.Errorf("%w\n  check -redis or HTTP_PROTECT_REDIS_URL, and that the server is running and reachable", err)
	}
	cfg.Logger = logger
	// Each page of a listing or a lift (a thousand bans) has this
	// deadline; a tool run by hand can wait longer than a request.
	cfg.StoreTimeout = max(cfg.StoreTimeout, 5*time.Second)
	scopes, err := c.scopes(ctx, rs, cfg)
	if err != nil {
		return err
	}
	var ps []*protect.Protector
	for _, sc := range scopes {
		pc := cfg
		pc.Namespace, pc.BanNamespace = sc.Namespace, sc.BanNamespace
		// The numbers the service counts with, where it published them:
		// inspect and explain must show those, not this tool's
		// environment.
		if pc, _, err = admin.ServiceConfig(ctx, pc); err != nil {
			return err
		}
		p, err := protect.New(pc)
		if err != nil {
			return err
		}
		// The protectors close before the store they were given.
		c.closers = append([]func() error{p.Close}, c.closers...)
		ps = append(ps, p)
	}
	rb := redisBackend{Service: admin.NewService(ps...), writer: admin.NewService(ps[0])}
	for _, sc := range scopes {
		if !slices.Contains(rb.lists, sc.BanNamespace) {
			rb.lists = append(rb.lists, sc.BanNamespace)
		}
	}
	c.svc = rb
	return nil
}

// redisBackend is the Redis path: it reads every list it covers, and bans
// in the first alone, the one -namespace or the environment names: the
// shared list it may also read is another service's to write.
type redisBackend struct {
	*admin.Service
	writer *admin.Service
	lists  []string // the ban lists read
}

// Lift lifts targets wherever they are banned, but lifts every ban only
// in a list that is certainly the service's: with two lists read, one is
// a guess.
func (b redisBackend) Lift(ctx context.Context, o admin.LiftOptions) ([]admin.BanRecord, error) {
	if o.All && len(b.lists) > 1 {
		return nil, usagef("lift -all: this reads two ban lists, %q and %q; set HTTP_PROTECT_BAN_NAMESPACE to the one to empty", b.lists[0], b.lists[1])
	}
	return b.Service.Lift(ctx, o)
}

// Events reads the journal of the service's own list.
func (b redisBackend) Events(ctx context.Context, since string, limit int) ([]admin.EventRecord, error) {
	return b.writer.Events(ctx, since, limit)
}

func (b redisBackend) Ban(ctx context.Context, targets []string, opt protect.BanOptions) ([]admin.BanRecord, error) {
	return b.writer.Ban(ctx, targets, opt)
}

// scopes are the protectors protectctl stands in for on the Redis path.
// -namespace NS counts and bans in NS, as a service that keeps both in
// one namespace does; when NS is a counter namespace whose service
// published its limits, its bans may be in the shared list instead
// (HTTP_PROTECT_BAN_NAMESPACE, protect: by default), so that list is
// read too (a ban is written in NS alone). Without -namespace, HTTP_PROTECT_NAMESPACE names one
// namespace, or else every published namespace is covered, each with the
// shared list.
func (c *cli) scopes(ctx context.Context, rs *redisstore.Store, cfg protect.Config) ([]store.Scope, error) {
	shared := cfg.BanNamespace
	if shared == "" {
		shared = protect.DefaultNamespace
	}
	if c.ns != "" {
		out := []store.Scope{{Namespace: c.ns, BanNamespace: c.ns}}
		if shared != c.ns {
			_, published, err := rs.Published(ctx, c.ns)
			if err != nil {
				return nil, err
			}
			if published {
				out = append(out, store.Scope{Namespace: c.ns, BanNamespace: shared})
			}
		}
		return out, nil
	}
	own := cfg.Namespace
	if own == "" {
		own = protect.DefaultNamespace
	}
	if os.Getenv(envNamespace) != "" {
		return []store.Scope{{Namespace: own, BanNamespace: shared}}, nil
	}
	names, err := publishedNamespaces(ctx, rs.Client())
	if err != nil {
		return nil, fmt.Errorf("list the published namespaces of %s: %w", rs.Addr(), err)
	}
	if len(names) == 0 {
		names = []string{own}
	}
	out := make([]store.Scope, 0, len(names))
	for _, ns := range names {
		out = append(out, store.Scope{Namespace: ns, BanNamespace: shared})
	}
	return out, nil
}

// ctx bounds a whole command: long enough to list or lift a hundred
// thousand bans page by page (each page has its own deadline).
func (c *cli) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Minute)
}

// writeJSON writes v as indented JSON on stdout.
func (c *cli) writeJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeBans writes bans as JSON or as a table with the time left. The
// table names each ban's list (LIST) when they come from several.
func (c *cli) writeBans(recs []admin.BanRecord, asJSON bool) error {
	if asJSON {
		return c.writeJSON(recs)
	}
	lists := false
	for _, r := range recs {
		lists = lists || r.BanNamespace != recs[0].BanNamespace
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	head := "KEY\tSOURCE\tREASON\tBY\tCREATED\tEXPIRES\tLEFT\tOFFENSE"
	if lists {
		head += "\tLIST"
	}
	fmt.Fprintln(tw, head)
	for _, r := range recs {
		if r.Malformed != "" {
			fmt.Fprintf(tw, "%s\tmalformed\t%s\t-\t-\t-\t-\t-\n", cell(r.Key), cell(r.Malformed))
			continue
		}
		expires, left := "never", "permanent"
		switch {
		case r.Permanent:
		case r.Expires == nil || r.SecondsLeft == nil: // a server's record that does not say
			expires, left = "-", "-"
		default:
			expires = r.Expires.Format(time.RFC3339)
			left = humanDuration(time.Duration(*r.SecondsLeft) * time.Second)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d", cell(r.Key), cell(r.Source), dash(r.Reason), dash(r.By),
			r.Created.Format(time.RFC3339), expires, left, r.Offense)
		if lists {
			fmt.Fprintf(tw, "\t%s", cell(r.BanNamespace))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// humanDuration writes long durations with days, as -for accepts them:
// 2d12h0m0s rather than 60h0m0s.
func humanDuration(d time.Duration) string {
	const day = 24 * time.Hour
	if d < day {
		return d.String()
	}
	if d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	return fmt.Sprintf("%dd%s", d/day, (d % day).String())
}

// dash is a table cell for s, "-" when empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return cell(s)
}

func bansCmd(fs *flag.FlagSet) func(*cli, []string) error {
	asJSON := fs.Bool("json", false, "write JSON ([] when there are none)")
	within := fs.String("within", "", "only bans inside this CIDR")
	source := fs.String("source", "", "only auto or manual bans")
	limit := fs.Int("limit", 0, "at most this many (soonest expiry first)")
	return func(c *cli, args []string) error {
		if len(args) > 0 {
			return usagef("bans takes no arguments, got %q", args)
		}
		f, err := admin.ParseFilter(*within, *source, strconv.Itoa(*limit))
		if err != nil {
			return fmt.Errorf("-%w", err)
		}
		ctx, cancel := c.ctx()
		defer cancel()
		bans, err := c.svc.Bans(ctx, f)
		if err != nil {
			return err
		}
		return c.writeBans(bans, *asJSON)
	}
}

// durationFlag accepts days: 2d12h.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return ""
	}
	return f.d.String()
}

// Set takes a length from a second to protect.MaxDuration: a shorter ban
// is over before anyone could check it, a typo ("-for 500ms" for "500m")
// more likely than a decision.
func (f durationFlag) Set(s string) error {
	d, err := envconfig.ParseDuration(s)
	if err != nil {
		return err
	}
	switch {
	case d < time.Second:
		return fmt.Errorf("%q: a ban lasts at least 1s (-permanent for one that never ends)", s)
	case d > protect.MaxDuration:
		return fmt.Errorf("%q: longer than %s (-permanent for one that never ends)", s, humanDuration(protect.MaxDuration))
	}
	*f.d = d
	return nil
}

// defaultBy names the operator: user@host.
func defaultBy() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return name + "@" + host
}

func banCmd(fs *flag.FlagSet) func(*cli, []string) error {
	var length time.Duration
	fs.Var(durationFlag{&length}, "for", "ban length, e.g. 90m, 2d12h (default the services' BanDuration)")
	permanent := fs.Bool("permanent", false, "a ban that never expires")
	reason := fs.String("reason", "", fmt.Sprintf("why, recorded with the ban (at most %d bytes)", protect.MaxReasonLen))
	by := fs.String("by", defaultBy(), "who bans, recorded with the ban")
	asJSON := fs.Bool("json", false, "write the bans added as JSON")
	force := fs.Bool("force", false, "ban a CIDR wider than a /8 of IPv4 or a /16 of IPv6")
	return func(c *cli, args []string) error {
		if len(args) == 0 {
			return usagef("ban needs at least one TARGET (an address, a CIDR or consumer:NAME)")
		}
		if *permanent && length != 0 {
			return usagef("-for and -permanent exclude each other")
		}
		if len(*reason) > protect.MaxReasonLen {
			return usagef("-reason: %d bytes; a reason holds at most %d", len(*reason), protect.MaxReasonLen)
		}
		ctx, cancel := c.ctx()
		defer cancel()
		bans, err := c.svc.Ban(ctx, args, protect.BanOptions{For: length, Permanent: *permanent, Reason: *reason, By: *by, Force: *force})
		if len(bans) > 0 {
			if werr := c.writeBans(bans, *asJSON); werr != nil {
				return werr
			}
		}
		return err
	}
}

func liftCmd(fs *flag.FlagSet) func(*cli, []string) error {
	all := fs.Bool("all", false, "lift every ban in the namespace")
	force := fs.Bool("force", false, "lift inside a CIDR wider than a /8 of IPv4 or a /16 of IPv6")
	by := fs.String("by", defaultBy(), "who lifts, for the log")
	asJSON := fs.Bool("json", false, "write the bans lifted as JSON")
	return func(c *cli, args []string) error {
		if *all && len(args) > 0 {
			return usagef("-all takes no TARGET")
		}
		if !*all && len(args) == 0 {
			return usagef("lift needs a TARGET, or -all to lift every ban")
		}
		ctx, cancel := c.ctx()
		defer cancel()
		lifted, err := c.svc.Lift(ctx, admin.LiftOptions{Targets: args, All: *all, Force: *force, By: *by})
		if err != nil {
			if len(lifted) > 0 { // what was lifted before the failure
				if werr := c.writeBans(lifted, *asJSON); werr != nil {
					return werr
				}
			}
			return err
		}
		if len(lifted) == 0 && !*asJSON {
			fmt.Fprintln(c.stderr, "protectctl: nothing was banned there")
			return nil
		}
		return c.writeBans(lifted, *asJSON)
	}
}

func inspectCmd(fs *flag.FlagSet) func(*cli, []string) error {
	asJSON := fs.Bool("json", false, "write JSON")
	plansFile := fs.String("plans", os.Getenv("HTTP_PROTECT_PLANS"), "the plans file protectd reads, to say what is left of each limit (default $HTTP_PROTECT_PLANS)")
	planName := fs.String("plan", "", "with -plans: only this plan, and its limits nothing was charged to")
	return func(c *cli, args []string) error {
		if len(args) != 1 {
			return usagef("inspect takes exactly one TARGET")
		}
		plans, err := readPlans(*plansFile, *planName)
		if err != nil {
			return err
		}
		ctx, cancel := c.ctx()
		defer cancel()
		in, err := c.svc.Inspect(ctx, args[0], plans)
		if err != nil {
			return err
		}
		if *asJSON {
			return c.writeJSON(in)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "target\t%s\nkey\t%s\nsafe\t%v\n", cell(in.Target), cell(in.Key), in.Safe)
		fmt.Fprintf(tw, "count\t%d of %d (ban past %d%s), forgotten in %ds\n", in.Count, in.Limit, in.BanLimit, limitsNote(in.LimitsPublished), in.CountSecondsLeft)
		fmt.Fprintf(tw, "offenses\t%d\n", in.Offenses)
		fmt.Fprintf(tw, "ban\t%s\n", describe(in.Ban))
		for _, r := range in.RangeBans {
			fmt.Fprintf(tw, "range ban\t%s: %s\n", cell(r.Key), describe(&r))
		}
		for _, l := range in.Limits {
			fmt.Fprintf(tw, "limit\t%s\n", describeLimit(l))
		}
		if len(in.Protectors) > 1 {
			for _, p := range in.Protectors {
				fmt.Fprintf(tw, "protector\t%s (bans in %s): key %s, count %d of %d (ban past %d%s), forgotten in %ds; ban %s\n",
					cell(p.Namespace), cell(p.BanNamespace), cell(p.Key), p.Count, p.Limit, p.BanLimit, limitsNote(p.LimitsPublished), p.CountSecondsLeft, describe(p.Ban))
			}
		}
		return tw.Flush()
	}
}

// limitsNote says where the limits shown come from, when not from the
// service.
func limitsNote(published bool) string {
	if published {
		return ""
	}
	return "; this tool's settings: the service published no limits"
}

// readPlans reads the plans file, keeping only plan name when given.
func readPlans(file, name string) (map[string]*protect.Plan, error) {
	if file == "" {
		if name != "" {
			return nil, usagef("-plan %q needs -plans FILE", name)
		}
		return nil, nil
	}
	plans, err := envconfig.LoadPlans(file) // a path, or the JSON itself as protectd takes it
	if err != nil {
		return nil, usagef("-plans: %v", err)
	}
	if name == "" {
		return plans, nil
	}
	p, ok := plans[name]
	if !ok {
		return nil, usagef("-plan %q: not in %s", name, file)
	}
	return map[string]*protect.Plan{name: p}, nil
}

// describeLimit says a stored limit in one line: "burst (rate): backlog
// 1.2s; left: pro 18 of 20".
func describeLimit(l admin.LimitRecord) string {
	reset := time.Duration(l.ResetMS) * time.Millisecond
	var b strings.Builder
	switch {
	case !l.Stored:
		fmt.Fprintf(&b, "%s (%s): nothing used", cell(l.Name), kindOf(l))
	case l.Kind == "rate":
		fmt.Fprintf(&b, "%s (rate): backlog %s", cell(l.Name), humanDuration(reset))
	default:
		fmt.Fprintf(&b, "%s (%s quota, %s): %d used, resets in %s", cell(l.Name), l.Period, cell(l.Window), l.Used, humanDuration(reset))
	}
	for i, left := range l.Left {
		sep := ", "
		if i == 0 {
			sep = "; left: "
		}
		fmt.Fprintf(&b, "%s%s %d of %d", sep, cell(left.Plan), left.Left, left.Limit)
	}
	return b.String()
}

func kindOf(l admin.LimitRecord) string {
	if l.Kind == "quota" {
		return l.Period + " quota"
	}
	return "rate"
}

// describe says a ban in one line.
func describe(r *admin.BanRecord) string {
	if r == nil {
		return "none"
	}
	if r.Malformed != "" {
		return "malformed record, not enforced (protectctl lift deletes it): " + cell(r.Malformed)
	}
	left := "permanent"
	switch {
	case r.Permanent:
	case r.SecondsLeft == nil: // a server's record that does not say
		left = "time left unknown"
	default:
		left = humanDuration(time.Duration(*r.SecondsLeft)*time.Second) + " left"
	}
	return fmt.Sprintf("%s, %s (%s, by %s, offense %d)", dash(r.Reason), left, cell(r.Source), dash(r.By), r.Offense)
}

// headerFlag collects -H 'Name: value' lines in order.
type headerFlag map[string][]string

func (h headerFlag) String() string { return "" }

func (h headerFlag) Set(s string) error {
	name, value, err := admin.ParseHeader(s)
	if err != nil {
		return err
	}
	h[name] = append(h[name], value)
	return nil
}

func explainCmd(fs *flag.FlagSet) func(*cli, []string) error {
	remote := fs.String("remote", "", "the connecting peer, as RemoteAddr: 10.0.0.1:5555")
	header := headerFlag{}
	fs.Var(header, "H", "a request header line 'Name: value' (repeat for more)")
	asJSON := fs.Bool("json", false, "write JSON")
	return func(c *cli, args []string) error {
		if *remote == "" {
			return usagef("explain needs -remote ADDR")
		}
		if len(args) > 0 {
			return usagef("explain takes no arguments, got %q", args)
		}
		ctx, cancel := c.ctx()
		defer cancel()
		ex, err := c.svc.Explain(ctx, *remote, header)
		if err != nil {
			return err
		}
		if *asJSON {
			return c.writeJSON(ex)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "peer\t%s\n", cell(ex.Peer))
		if ex.Client == "" {
			fmt.Fprintf(tw, "client\tunknown: %s\n", cell(ex.Reason))
		} else {
			fmt.Fprintf(tw, "client\t%s\n", cell(ex.Client))
		}
		if ex.Key != "" {
			fmt.Fprintf(tw, "key\t%s\ncount\t%d of %d (ban past %d%s)\n", cell(ex.Key), ex.Count, ex.Limit, ex.BanLimit, limitsNote(ex.LimitsPublished))
		}
		dry := ""
		if ex.DryRun {
			dry = " (dry run: served, refusals only logged)"
		}
		fmt.Fprintf(tw, "step\t%s → %d%s\n", ex.Step, ex.Status, dry)
		if ex.Ban != nil {
			fmt.Fprintf(tw, "ban\t%s: %s\n", cell(ex.Ban.Key), describe(ex.Ban))
		}
		for _, n := range ex.Notes {
			fmt.Fprintf(tw, "note\t%s\n", cell(n))
		}
		if len(ex.Protectors) > 1 {
			for _, p := range ex.Protectors {
				fmt.Fprintf(tw, "protector\t%s (bans in %s): %s → %d, count %d of %d\n",
					cell(p.Namespace), cell(p.BanNamespace), p.Step, p.Status, p.Count, p.Limit)
			}
		}
		return tw.Flush()
	}
}

func checkCmd(fs *flag.FlagSet) func(*cli, []string) error {
	asJSON := fs.Bool("json", false, "write JSON")
	return func(c *cli, args []string) error {
		if len(args) != 1 {
			return usagef("check takes exactly one ADDR")
		}
		addr, err := admin.ParseCheckAddr(args[0])
		if err != nil {
			return err
		}
		ctx, cancel := c.ctx()
		defer cancel()
		rep, err := c.svc.Check(ctx, addr)
		if err != nil {
			return err
		}
		if *asJSON {
			err = c.writeJSON(rep)
		} else {
			err = c.writeCheck(rep)
		}
		if err == nil && rep.Refused {
			return errRefused
		}
		return err
	}
}

// writeCheck writes a check report as a table: one line per source.
func (c *cli) writeCheck(rep admin.CheckReport) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "addr\t%s\n", cell(rep.Addr))
	if rep.Safe {
		fmt.Fprintf(tw, "safe\tyes: %s passes it first\n", cell(strings.Join(rep.SafeNetworks, ", ")))
	} else {
		fmt.Fprintf(tw, "safe\tno\n")
	}
	for _, src := range rep.Sources {
		left := "permanent"
		switch {
		case src.Permanent:
		case src.SecondsLeft == nil: // a server's record that does not say
			left = "time left unknown"
		default:
			left = humanDuration(time.Duration(*src.SecondsLeft)*time.Second) + " left"
		}
		what := strings.ReplaceAll(src.Kind, "_", " ")
		fmt.Fprintf(tw, "%s\t%s (list %s): %s, %s\n", what, cell(src.Entry), cell(src.List), dash(src.Reason), left)
	}
	verdict := "no: nothing refuses it"
	switch {
	case rep.Refused:
		verdict = "yes"
	case len(rep.Sources) > 0:
		verdict = "no: safe first"
	}
	fmt.Fprintf(tw, "refused\t%s\n", verdict)
	return tw.Flush()
}

func protectorsCmd(fs *flag.FlagSet) func(*cli, []string) error {
	asJSON := fs.Bool("json", false, "write JSON")
	return func(c *cli, args []string) error {
		if len(args) > 0 {
			return usagef("protectors takes no arguments, got %q", args)
		}
		ctx, cancel := c.ctx()
		defer cancel()
		recs, err := c.svc.Protectors(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return c.writeJSON(recs)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tNAMESPACE\tBANS IN\tMAX REQUESTS\tTTL\tBAN LIMIT\tBAN DURATION\tLIMITS")
		for _, r := range recs {
			from := "published"
			if !r.Published {
				from = "not published"
			}
			if r.DryRun {
				from += ", dry run"
			}
			l := r.Limits
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", cell(r.Name), cell(r.Namespace), cell(r.BanNamespace), l.MaxRequests,
				humanDuration(time.Duration(l.TTLMS)*time.Millisecond), l.BanLimit, humanDuration(time.Duration(l.BanDurationMS)*time.Millisecond), from)
		}
		return tw.Flush()
	}
}

func versionCmd(fs *flag.FlagSet) func(*cli, []string) error {
	return func(c *cli, args []string) error {
		v := "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
		fmt.Fprintf(c.stdout, "protectctl %s %s\n", strings.TrimSpace(v), goVersion())
		return nil
	}
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return ""
}
