package redisstore

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Dial parses a Redis URL (redis://, rediss://, unix://) and returns
// a store on a new client that it owns and closes on Close. The client
// honours context deadlines and does not retry: Config.StoreTimeout and the
// failure policy decide what a slow or dead Redis costs. It does not
// connect: the first command does.
func Dial(rawURL string, opt Options) (*Store, error) {
	o, err := redisOptions(rawURL)
	if err != nil {
		return nil, fmt.Errorf("protect: %w", err)
	}
	s := New(redis.NewClient(o), opt)
	s.ownsConn = true
	return s, nil
}

// redisOptions parses a Redis URL into the client options the limiter
// needs. Its error names only the URL's scheme, host and port; see
// redisURLError.
func redisOptions(rawURL string) (*redis.Options, error) {
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, redisURLError(rawURL)
	}
	o.ContextTimeoutEnabled = true
	if o.MaxRetries == 0 {
		o.MaxRetries = -1
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = time.Second
	}
	// go-redis dials up to 5 times, 100ms apart, inside one call: a
	// refused connection then outlives StoreTimeout, and the call fails
	// with "context deadline exceeded" instead of what happened. The
	// breaker and the failure policy are the retry.
	if o.DialerRetries == 0 {
		o.DialerRetries = 1
	}
	return o, nil
}

// ErrURL is wrapped by the error of a Redis URL that does not parse.
var ErrURL = errors.New("not a Redis URL")

// redisURLError says why rawURL is not a Redis URL, naming only its
// scheme, host and port. It never quotes the URL nor the parser's error:
// both carry the password when the URL is malformed, and malformed URLs
// are the ones that end up in logs. A password holding '/', '?', '#' or
// '@' that is not percent-encoded ends the URL's authority early, so the
// parsers read part of the password as a port ("invalid port
// \":hunter2\""), a database or a path. The host is taken after the last
// '@', where no password can be, and the port is named only when it is a
// port number.
func redisURLError(rawURL string) error {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || (scheme != "redis" && scheme != "rediss" && scheme != "unix") {
		return fmt.Errorf("redis URL: %w: want redis://[user:password@]host:port/db, rediss://… or unix://…", ErrURL)
	}
	where := "scheme " + scheme
	reason := "want " + scheme + "://[user:password@]host:port/db, with / ? # @ in a password percent-encoded"
	if scheme != "unix" {
		hostport := rest[strings.LastIndexByte(rest, '@')+1:]
		if i := strings.IndexAny(hostport, "/?#"); i >= 0 {
			hostport = hostport[:i]
		}
		host, port := splitURLHost(hostport)
		if host != "" {
			where += ", host " + host
		}
		switch {
		case port == "":
		case portNumber(port):
			where += ", port " + port
		default:
			reason = "the port is not a number from 1 to 65535; percent-encode / ? # @ in a password"
		}
	}
	return fmt.Errorf("redis URL (%s): %w: %s", where, ErrURL, reason)
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
	for i := 0; i < len(host); i++ {
		b := host[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '.' || b == '-' || b == '_') {
			return "", port
		}
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
