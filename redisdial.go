package protect

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/redis/go-redis/v9"
)

// DialRedis parses a Redis URL (redis://, rediss://, unix://) and returns
// a store on a new client that it owns and closes on Close. The client
// honours context deadlines and does not retry: Config.StoreTimeout and the
// failure policy decide what a slow or dead Redis costs. It does not
// connect: the first command does.
func DialRedis(rawURL string, opt RedisOptions) (*RedisStore, error) {
	o, err := redisOptions(rawURL)
	if err != nil {
		return nil, fmt.Errorf("protect: %w", err)
	}
	s := NewRedisStore(redis.NewClient(o), opt)
	s.ownsConn = true
	return s, nil
}

// redisOptions parses a Redis URL into the client options the limiter
// needs. Its error quotes the URL with any password masked.
func redisOptions(rawURL string) (*redis.Options, error) {
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q: %w", redactURL(rawURL), cmp.Or(errors.Unwrap(err), err))
	}
	o.ContextTimeoutEnabled = true
	if o.MaxRetries == 0 {
		o.MaxRetries = -1
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = time.Second
	}
	return o, nil
}

var urlSecret = regexp.MustCompile(`//[^/@]*@`)

// redactURL hides the credentials of a URL quoted in an error.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	}
	return urlSecret.ReplaceAllString(raw, "//xxxxx@")
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
