package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Dial parses a Redis URL and returns a store on a new client that it
// owns and closes on Close. The URL names the topology:
//
//	redis://[user:password@]host:port[/db]        one node (rediss:// with TLS)
//	unix:///path/to/redis.sock                      one node, on a socket
//	redis+cluster://[user:password@]host:port,host:port
//	                                                Redis Cluster (rediss+cluster:// with TLS)
//	redis+sentinel://[user:password@]host:port,host:port/MASTER[/db]
//	                                                Sentinel (rediss+sentinel:// with TLS)
//
// A Cluster URL lists some of the cluster's nodes (the client learns the
// others), a Sentinel URL the sentinels and the name of the master they
// watch; user and password are those of the Redis nodes (a sentinel
// that wants its own takes the query parameters sentinel_username and
// sentinel_password). The go-redis options of the URL's query (such as
// dial_timeout=2s) apply as go-redis reads them. With TLS each node's
// certificate is checked against that node's own host name.
//
// The client Dial makes honours context deadlines, never retries a
// counting script (a script whose reply was lost may have counted: it
// becomes an error that the failure policy absorbs), dials once per
// call, and on a Cluster reads the slot map again as soon as a node fails
// and every second while it is in use, so that a promoted replica takes
// the requests within seconds. Config.StoreTimeout and the circuit
// breaker decide what a slow or dead Redis costs.
//
// Dial makes one round trip, under a deadline of a few seconds: a
// one-node URL whose server is a Cluster node is an error that says to
// use redis+cluster:// (a one-node client there would fail every request
// with MOVED, or count per node), and a Cluster URL whose server is not
// one says to use redis://. A server that does not answer is no error:
// the failure policy decides until it does, and Store.Ping checks.
//
// A URL Dial cannot take is an error that wraps ErrURL and quotes the URL
// with its password, and the values of query parameters that name a
// password, replaced by xxxxx; so does a URL that lists several hosts
// under a one-node scheme.
func Dial(rawURL string, opt Options) (*Store, error) {
	client, err := newURLClient(rawURL)
	if err != nil {
		return nil, fmt.Errorf("protect: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialCheckTimeout)
	err = checkTopology(ctx, client, rawURL)
	cancel()
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("protect: %w", err)
	}
	s := New(client, opt)
	s.ownsConn = true
	if strings.Contains(rawURL, "+sentinel://") {
		s.topo.where = redactURL(rawURL) // the client's own Addr says "FailoverClient"
	}
	return s, nil
}

// dialCheckTimeout bounds Dial's one round trip.
const dialCheckTimeout = 2 * time.Second

// clusterReload is how often a Cluster client that Dial made reads the
// slot map while it is in use, besides after each failure: one CLUSTER
// SLOTS a second per process costs a cluster nothing, and a failover the
// client did not see fail is picked up within it.
const clusterReload = time.Second

// newURLClient returns a new go-redis client for rawURL, configured as
// the store needs.
func newURLClient(rawURL string) (redis.UniversalClient, error) {
	scheme, _, _ := strings.Cut(rawURL, "://")
	switch scheme {
	case "redis+cluster", "rediss+cluster":
		o, err := clusterOptions(rawURL)
		if err != nil {
			return nil, err
		}
		return redis.NewClusterClient(o), nil
	case "redis+sentinel", "rediss+sentinel":
		o, err := sentinelOptions(rawURL)
		if err != nil {
			return nil, err
		}
		return redis.NewFailoverClient(o), nil
	}
	o, err := redisOptions(rawURL)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(o), nil
}

// redisOptions parses a one-node Redis URL into the client options the
// limiter needs. Its error quotes the URL redacted; see redisURLError.
func redisOptions(rawURL string) (*redis.Options, error) {
	if scheme, rest, ok := strings.Cut(rawURL, "://"); ok && (scheme == "redis" || scheme == "rediss") {
		if hosts, _ := urlHosts(rest); strings.Contains(hosts, ",") {
			return nil, severalHosts(rawURL, scheme, hosts)
		}
	}
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, redisURLError(rawURL)
	}
	clientDefaults(&o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.DialTimeout)
	return o, nil
}

// clientDefaults sets what every client Dial builds needs, of whatever
// topology, unless the URL's query set it: the context's deadline
// bounds each call; no retry of a command (a counting script run twice
// counts twice: see noretry.go); a one-second dial. go-redis dials up
// to 5 times, 100ms apart, inside one call: a refused connection then
// outlives StoreTimeout, and the call fails with "context deadline
// exceeded" instead of what happened. The breaker and the failure
// policy are the retry.
func clientDefaults(ctxTimeout *bool, maxRetries, dialerRetries *int, dialTimeout *time.Duration) {
	*ctxTimeout = true
	if *maxRetries == 0 {
		*maxRetries = -1
	}
	if *dialTimeout == 0 {
		*dialTimeout = time.Second
	}
	if *dialerRetries == 0 {
		*dialerRetries = 1
	}
}

// clusterOptions parses a redis+cluster:// or rediss+cluster:// URL.
// The URL is rewritten into go-redis' own cluster URL (the first host,
// then addr=host for each other) so that go-redis reads the userinfo and
// the query as it documents them.
func clusterOptions(rawURL string) (*redis.ClusterOptions, error) {
	u, err := splitMultiHost(rawURL)
	if err != nil {
		return nil, err
	}
	if u.path != "" && u.path != "/" && u.path != "/0" {
		return nil, urlError(rawURL, "a Cluster has database 0 only: want "+u.scheme+"://[user:password@]host:port,host:port")
	}
	o, err := redis.ParseClusterURL(u.goRedisURL("", u.query))
	if err != nil {
		return nil, urlError(rawURL, "want "+u.scheme+"://[user:password@]host:port,host:port[?go-redis options]")
	}
	// MaxRedirects stays go-redis' own: it bounds the MOVED and ASK
	// redirects a command follows, which do not execute it twice; the
	// retries of a lost reply are refused per command (noretry.go).
	clientDefaults(&o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.DialTimeout)
	if o.ClusterStateReloadInterval == 0 {
		o.ClusterStateReloadInterval = clusterReload
	}
	if o.TLSConfig != nil {
		// go-redis takes the server name from the URL's first host:
		// cleared, each connection checks the certificate of the node it
		// reaches against that node's own name (crypto/tls infers it from
		// the address); one name for all would refuse every other node.
		o.TLSConfig.ServerName = ""
	}
	return o, nil
}

// sentinelOptions parses a redis+sentinel:// or rediss+sentinel:// URL,
// rewritten into go-redis' failover URL. go-redis gives that URL's
// userinfo to the sentinels; here it belongs to the Redis nodes, as in
// every other scheme, and the sentinels' own come from the query.
func sentinelOptions(rawURL string) (*redis.FailoverOptions, error) {
	u, err := splitMultiHost(rawURL)
	if err != nil {
		return nil, err
	}
	want := "want " + u.scheme + "://[user:password@]host:port,host:port/MASTER[/db]"
	parts := strings.Split(strings.TrimPrefix(u.path, "/"), "/")
	if u.path == "" || parts[0] == "" || len(parts) > 2 {
		return nil, urlError(rawURL, "no master name: "+want)
	}
	master, err := url.PathUnescape(parts[0])
	if err != nil {
		return nil, urlError(rawURL, want)
	}
	db := ""
	if len(parts) == 2 {
		if _, err := strconv.ParseUint(parts[1], 10, 8); err != nil {
			return nil, urlError(rawURL, "the database is not a number: "+want)
		}
		db = "/" + parts[1]
	}
	q, err := url.ParseQuery(u.query)
	if err != nil {
		return nil, urlError(rawURL, want)
	}
	sentinelUser, sentinelPassword := q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	if q.Has("master_name") {
		return nil, urlError(rawURL, "the master is named in the path: "+want)
	}
	q.Set("master_name", master)
	o, err := redis.ParseFailoverURL(u.goRedisURL(db, q.Encode()))
	if err != nil {
		return nil, urlError(rawURL, want+"[?go-redis options]")
	}
	if o.Username == "" && o.Password == "" {
		o.Username, o.Password = o.SentinelUsername, o.SentinelPassword
	}
	o.SentinelUsername, o.SentinelPassword = sentinelUser, sentinelPassword
	clientDefaults(&o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.DialTimeout)
	if o.TLSConfig != nil {
		o.TLSConfig.ServerName = "" // each node's own name, as in clusterOptions
	}
	return o, nil
}

// multiHostURL is a URL of several hosts, split: what net/url cannot
// parse, since its host holds commas.
type multiHostURL struct {
	scheme   string   // as given: redis+cluster, rediss+sentinel…
	userinfo string   // raw, without the '@'; "" when absent
	hasUser  bool     // an '@' was there
	hosts    []string // host:port each
	path     string   // raw, from its '/'
	query    string   // raw, without the '?'
}

// splitMultiHost splits a URL of the + schemes. The userinfo ends at the
// last '@', as in redisURLError, so that a password holding an
// unencoded '/' is not read as a host.
func splitMultiHost(rawURL string) (multiHostURL, error) {
	scheme, rest, _ := strings.Cut(rawURL, "://")
	u := multiHostURL{scheme: scheme}
	want := "want " + scheme + "://[user:password@]host:port,host:port"
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		u.userinfo, u.hasUser, rest = rest[:at], true, rest[at+1:]
	}
	hosts, tail := urlHosts(rest)
	if strings.Contains(tail, "#") {
		return u, urlError(rawURL, "a fragment (#) is not part of a Redis URL; percent-encode / ? # @ in a password")
	}
	u.path, u.query, _ = strings.Cut(tail, "?")
	if hosts == "" {
		return u, urlError(rawURL, "no host: "+want)
	}
	for h := range strings.SplitSeq(hosts, ",") {
		host, port := splitURLHost(h)
		switch {
		case host == "" || host == "[]":
			return u, urlError(rawURL, "a host is empty or not a host name: "+want)
		case port == "":
			port = "6379"
		case !portNumber(port):
			return u, urlError(rawURL, "a port is not a number from 1 to 65535; percent-encode / ? # @ in a password")
		}
		u.hosts = append(u.hosts, net.JoinHostPort(strings.Trim(host, "[]"), port))
	}
	return u, nil
}

// goRedisURL writes u as go-redis' cluster and failover parsers read it:
// redis[s]://userinfo@first/path?query&addr=other…
func (u multiHostURL) goRedisURL(path, query string) string {
	var b strings.Builder
	b.WriteString(strings.SplitN(u.scheme, "+", 2)[0])
	b.WriteString("://")
	if u.hasUser {
		b.WriteString(u.userinfo)
		b.WriteByte('@')
	}
	b.WriteString(u.hosts[0])
	b.WriteString(path)
	b.WriteByte('?')
	b.WriteString(query)
	for _, h := range u.hosts[1:] {
		if b.String()[b.Len()-1] != '?' {
			b.WriteByte('&')
		}
		b.WriteString("addr=")
		b.WriteString(url.QueryEscape(h))
	}
	return b.String()
}

// urlHosts splits what follows a URL's userinfo into its host list and
// the rest (path, query, fragment).
func urlHosts(afterUserinfo string) (hosts, tail string) {
	rest := afterUserinfo[strings.LastIndexByte(afterUserinfo, '@')+1:]
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		return rest[:i], rest[i:]
	}
	return rest, ""
}

// severalHosts is the error of a one-node URL that lists several hosts.
func severalHosts(rawURL, scheme, hosts string) error {
	tls := ""
	if scheme == "rediss" {
		tls = "s"
	}
	safe := redactURL(scheme + "://" + hosts)
	safe = strings.TrimPrefix(safe, scheme+"://")
	return urlError(rawURL, fmt.Sprintf("%s:// is one node, and this lists several hosts: use redis%s+cluster://%s for a Redis Cluster, or redis%s+sentinel://%s/MASTER for Sentinel",
		scheme, tls, safe, tls, safe))
}

// ErrURL is wrapped by the error of a Redis URL that Dial cannot take: one
// that does not parse, or names the wrong topology for its server.
var ErrURL = errors.New("not a Redis URL")

// urlError is the error of rawURL, quoted redacted, for reason.
func urlError(rawURL, reason string) error {
	return fmt.Errorf("redis URL %q: %w: %s", redactURL(rawURL), ErrURL, reason)
}

// redisURLError says why rawURL is not a one-node Redis URL. It quotes
// the URL redacted (RedactURL), never the parser's error: that carries
// the password when the URL is malformed, and malformed URLs are the
// ones that end up in logs.
func redisURLError(rawURL string) error {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || !knownScheme(scheme) {
		return fmt.Errorf("redis URL: %w: want redis://[user:password@]host:port/db, rediss://…, unix://…, redis+cluster://host:port,host:port or redis+sentinel://host:port,host:port/MASTER", ErrURL)
	}
	reason := "want " + scheme + "://[user:password@]host:port/db, with / ? # @ in a password percent-encoded"
	if scheme == "unix" {
		reason = "want unix://[user:password@]/path/to/redis.sock[?db=N], with / ? # @ in a password percent-encoded"
	} else {
		hosts, _ := urlHosts(rest)
		if _, port := splitURLHost(hosts); port != "" && !portNumber(port) {
			reason = "the port is not a number from 1 to 65535; percent-encode / ? # @ in a password"
		}
	}
	return urlError(rawURL, reason)
}

func knownScheme(s string) bool {
	switch s {
	case "redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel":
		return true
	}
	return false
}

// redactURL returns rawURL fit for a message: the userinfo (everything
// up to the last '@', which is where a password with an unencoded '/',
// '?' or '#' ends) becomes xxxxx, as does the value of each query
// parameter whose name holds "password", and any other part that is not
// plainly a host, a port, a path or a setting (a number, a duration,
// true or false) is shown as "…". A string
// without a Redis scheme gives "…". Store.Addr names a dialed store so.
func redactURL(rawURL string) string {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || !knownScheme(scheme) {
		return "…"
	}
	var b strings.Builder
	b.WriteString(scheme)
	b.WriteString("://")
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		if strings.Contains(strings.ToLower(rest[:at]), "password") {
			// A query before the last '@' that names a password: where
			// that password ends is anyone's guess.
			b.WriteString("…")
			return b.String()
		}
		b.WriteString("xxxxx@")
		rest = rest[at+1:]
	}
	hosts, tail := urlHosts(rest)
	if scheme == "unix" {
		hosts, tail = "", rest
	}
	for i, h := range strings.Split(hosts, ",") {
		if i > 0 {
			b.WriteByte(',')
		}
		host, port := splitURLHost(h)
		switch {
		case host == "" && h != "":
			b.WriteString("…")
		default:
			b.WriteString(host)
		}
		switch {
		case port == "":
		case portNumber(port):
			b.WriteString(":" + port)
		default:
			b.WriteString(":…")
		}
	}
	tail, fragment, hasFragment := strings.Cut(tail, "#")
	path, query, hasQuery := strings.Cut(tail, "?")
	if plain(path, "/._-~") {
		b.WriteString(path)
	} else {
		b.WriteString("/…")
	}
	if hasQuery {
		b.WriteByte('?')
		for i, kv := range strings.Split(query, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			k, v, hasValue := strings.Cut(kv, "=")
			switch {
			case !plain(k, "_-."):
				b.WriteString("…")
				continue
			case strings.Contains(strings.ToLower(k), "password"):
				v = "xxxxx"
			case !settingValue(v):
				v = "…"
			}
			b.WriteString(k)
			if hasValue {
				b.WriteString("=" + v)
			}
		}
	}
	if hasFragment && fragment != "" {
		b.WriteString("#…")
	}
	return b.String()
}

// settingValue reports whether a query value may be quoted: a number or
// a duration (dial_timeout=2s), true or false. A word might be a secret
// put in the wrong parameter.
func settingValue(v string) bool {
	if v == "true" || v == "false" {
		return true
	}
	digits := strings.TrimLeft(v, "0123456789.")
	return len(digits) < len(v) && len(digits) <= 2 && plain(digits, "")
}

// plain reports whether s holds only ASCII letters, digits and the bytes
// of extra.
func plain(s, extra string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(extra, c) >= 0) {
			return false
		}
	}
	return true
}

// splitURLHost splits a URL's host:port; a host that is not a plain
// name or address is dropped, as it may be part of a password.
func splitURLHost(hostport string) (host, port string) {
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", ""
		}
		host, port = hostport[:end+1], strings.TrimPrefix(hostport[end+1:], ":")
		if _, err := netip.ParseAddr(host[1 : len(host)-1]); err != nil {
			host = ""
		}
		return host, port
	}
	host, port, _ = strings.Cut(hostport, ":")
	if !plain(host, ".-_") {
		return "", port
	}
	return host, port
}

// portNumber says whether s is a TCP port number, 1 to 65535.
func portNumber(s string) bool {
	n, err := strconv.ParseUint(s, 10, 16)
	return err == nil && n > 0 && len(s) <= 5
}

// contextTimeouts reports whether a go-redis client honours deadlines.
func contextTimeouts(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true // unknown implementations: assume the best, say nothing
}
