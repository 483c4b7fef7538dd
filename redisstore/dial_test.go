package redisstore

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The error of a URL Dial cannot take quotes it with the password
// redacted, whatever the password holds, and wraps ErrURL.
func TestRedisURLErrorNeverQuotesThePassword(t *testing.T) {
	const (
		wantDB   = `: not a Redis URL: want redis://[user:password@]host:port/db, with / ? # @ in a password percent-encoded`
		wantPort = `: not a Redis URL: the port is not a number from 1 to 65535; percent-encode / ? # @ in a password`
		wantAny  = `protect: redis URL: not a Redis URL: want redis://[user:password@]host:port/db, rediss://…, unix://…, redis+cluster://host:port,host:port or redis+sentinel://host:port,host:port/MASTER`
	)
	for _, tc := range []struct {
		url    string
		secret string
		want   string // the error, exactly
	}{
		{"redis://:hunter2@127.0.0.1:notaport", "hunter2", `protect: redis URL "redis://xxxxx@127.0.0.1:…"` + wantPort},
		{"redis://default:hunter2", "hunter2", `protect: redis URL "redis://default:…"` + wantPort},
		{"redis://:hunter2@host:6379/notadb", "hunter2", `protect: redis URL "redis://xxxxx@host:6379/notadb"` + wantDB},
		{"redis://:hun/ter2@redis.internal:6379/0", "ter2", `protect: redis URL "redis://xxxxx@redis.internal:6379/0"` + wantDB},
		{"redis://:hunter2/@redis.internal:6379/0", "hunter2", `protect: redis URL "redis://xxxxx@redis.internal:6379/0"` + wantDB},
		{"redis://:9/8/hunter2@10.0.0.5:6380/0", "hunter2", `protect: redis URL "redis://xxxxx@10.0.0.5:6380/0"` + wantDB},
		{"redis://:hun?ter2@[2001:db8::1]:6379/0", "ter2", `protect: redis URL "redis://xxxxx@[2001:db8::1]:6379/0"` + wantDB},
		{"redis://:hun#ter2@h:6379", "ter2", `protect: redis URL "redis://xxxxx@h:6379"` + wantDB},
		{"redis://:p@ss/word@h:6379/0", "ss/word", `protect: redis URL "redis://xxxxx@h:6379/0"` + wantDB},
		{"rediss://user:hunter2@h:6379/0?dial_timeout=hunter2", "hunter2",
			`protect: redis URL "rediss://xxxxx@h:6379/0?dial_timeout=…": not a Redis URL: want rediss://[user:password@]host:port/db, with / ? # @ in a password percent-encoded`},
		{"redis://:%zzhunter2@h:6379", "hunter2", `protect: redis URL "redis://xxxxx@h:6379"` + wantDB},
		{"http://:hunter2@h", "hunter2", wantAny},
		{":hunter2@h:6379", "hunter2", wantAny},
		{"unix://:hunter2@/tmp/x.sock?db=x", "hunter2",
			`protect: redis URL "unix://xxxxx@/tmp/x.sock?db=…": not a Redis URL: want unix://[user:password@]/path/to/redis.sock[?db=N], with / ? # @ in a password percent-encoded`},
		// Several hosts need a scheme that says how to use them.
		{"redis://:hunter2@a:6379,b:6379/0", "hunter2",
			`protect: redis URL "redis://xxxxx@a:6379,b:6379/0": not a Redis URL: redis:// is one node, and this lists several hosts: use redis+cluster://a:6379,b:6379 for a Redis Cluster, or redis+sentinel://a:6379,b:6379/MASTER for Sentinel`},
		{"rediss://a:1,b:2", "\x00",
			`protect: redis URL "rediss://a:1,b:2": not a Redis URL: rediss:// is one node, and this lists several hosts: use rediss+cluster://a:1,b:2 for a Redis Cluster, or rediss+sentinel://a:1,b:2/MASTER for Sentinel`},
		// The topologies' own mistakes.
		{"redis+cluster://:hunter2@a:1,b:2/3", "hunter2",
			`protect: redis URL "redis+cluster://xxxxx@a:1,b:2/3": not a Redis URL: a Cluster has database 0 only: want redis+cluster://[user:password@]host:port,host:port`},
		{"redis+cluster://", "\x00", `protect: redis URL "redis+cluster://": not a Redis URL: no host: want redis+cluster://[user:password@]host:port,host:port`},
		{"redis+cluster://:hunter2@a:1,,b:2", "hunter2",
			`protect: redis URL "redis+cluster://xxxxx@a:1,,b:2": not a Redis URL: a host is empty or not a host name: want redis+cluster://[user:password@]host:port,host:port`},
		{"rediss+cluster://a:1,b:hunter2", "hunter2",
			`protect: redis URL "rediss+cluster://a:1,b:…": not a Redis URL: a port is not a number from 1 to 65535; percent-encode / ? # @ in a password`},
		{"redis+cluster://a:1?nope=1", "\x00", `protect: redis URL "redis+cluster://a:1?nope=1": not a Redis URL: want redis+cluster://[user:password@]host:port,host:port[?go-redis options]`},
		{"redis+cluster://:hun#ter2@a:1", "ter2", `protect: redis URL "redis+cluster://xxxxx@a:1": not a Redis URL: want redis+cluster://[user:password@]host:port,host:port[?go-redis options]`},
		{"redis+cluster://a:1#x", "\x00", `protect: redis URL "redis+cluster://a:1#…": not a Redis URL: a fragment (#) is not part of a Redis URL; percent-encode / ? # @ in a password`},
		{"redis+sentinel://:hunter2@a:1,b:2", "hunter2",
			`protect: redis URL "redis+sentinel://xxxxx@a:1,b:2": not a Redis URL: no master name: want redis+sentinel://[user:password@]host:port,host:port/MASTER[/db]`},
		{"redis+sentinel://a:1/mymaster/x", "\x00",
			`protect: redis URL "redis+sentinel://a:1/mymaster/x": not a Redis URL: the database is not a number: want redis+sentinel://[user:password@]host:port,host:port/MASTER[/db]`},
		{"redis+sentinel://a:1/m/0/1", "\x00",
			`protect: redis URL "redis+sentinel://a:1/m/0/1": not a Redis URL: no master name: want redis+sentinel://[user:password@]host:port,host:port/MASTER[/db]`},
		{"redis+sentinel://a:1/m?master_name=n&sentinel_password=hunter2", "hunter2",
			`protect: redis URL "redis+sentinel://a:1/m?master_name=…&sentinel_password=xxxxx": not a Redis URL: the master is named in the path: want redis+sentinel://[user:password@]host:port,host:port/MASTER[/db]`},
		{"redis+sentinel://a:1/m?password=hun@ter2", "ter2", `protect: redis URL "redis+sentinel://…": not a Redis URL: no master name: want redis+sentinel://[user:password@]host:port,host:port/MASTER[/db]`},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := Dial(tc.url, Options{})
			if err == nil {
				t.Fatal("accepted")
			}
			if err.Error() != tc.want || strings.Contains(err.Error(), tc.secret) {
				t.Fatalf("Dial(%q) = %q\nwant %q, without %q", tc.url, err, tc.want, tc.secret)
			}
			if !errors.Is(err, ErrURL) {
				t.Fatalf("Dial(%q) = %v, want an error wrapping ErrURL", tc.url, err)
			}
		})
	}
}

// Each scheme makes the client of its topology, with the options the
// store needs: deadlines honoured, no retry, one dial a call; a Cluster
// client that follows redirects and reads its slot map every second.
func TestRedisURLTopologies(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want func(t *testing.T, c redis.UniversalClient)
	}{
		{"redis://u:p%2Fw@10.0.0.5:6380/2", func(t *testing.T, c redis.UniversalClient) {
			o := c.(*redis.Client).Options()
			if o.Addr != "10.0.0.5:6380" || o.Username != "u" || o.Password != "p/w" || o.DB != 2 || o.TLSConfig != nil ||
				!o.ContextTimeoutEnabled || o.MaxRetries != 0 || o.DialTimeout != time.Second || o.DialerRetries != 1 {
				t.Fatalf("options = %+v; want MaxRetries 0 (go-redis reads the -1 given as none)", o)
			}
		}},
		{"redis+cluster://u:pw@10.0.0.5:6379,10.0.0.6:6379,[2001:db8::7]:6379", func(t *testing.T, c redis.UniversalClient) {
			o := c.(*redis.ClusterClient).Options()
			if !slices.Equal(o.Addrs, []string{"10.0.0.5:6379", "10.0.0.6:6379", "[2001:db8::7]:6379"}) || o.Username != "u" || o.Password != "pw" ||
				o.TLSConfig != nil || !o.ContextTimeoutEnabled || o.MaxRetries != -1 || o.MaxRedirects != 3 ||
				o.DialTimeout != time.Second || o.DialerRetries != 1 || o.ClusterStateReloadInterval != time.Second {
				t.Fatalf("options = %+v", o)
			}
		}},
		{"rediss+cluster://:pw@a.example:7000,b.example?dial_timeout=3s", func(t *testing.T, c redis.UniversalClient) {
			o := c.(*redis.ClusterClient).Options()
			if !slices.Equal(o.Addrs, []string{"a.example:7000", "b.example:6379"}) || o.Password != "pw" || o.TLSConfig == nil ||
				o.TLSConfig.ServerName != "" || o.DialTimeout != 3*time.Second {
				t.Fatalf("options = %+v, TLS %+v; want TLS with each node's own name", o, o.TLSConfig)
			}
		}},
		{"redis+sentinel://u:pw@s1:26379,s2:26379,s3/mymaster/3?sentinel_password=spw", func(t *testing.T, c redis.UniversalClient) {
			// A failover client is a *redis.Client that asks the sentinels
			// where the master is; its options are not exported, so the
			// parser's are checked.
			if _, ok := c.(*redis.Client); !ok {
				t.Fatalf("client = %T, want *redis.Client", c)
			}
			o, err := sentinelOptions("redis+sentinel://u:pw@s1:26379,s2:26379,s3/mymaster/3?sentinel_password=spw")
			if err != nil {
				t.Fatal(err)
			}
			if o.MasterName != "mymaster" || !slices.Equal(o.SentinelAddrs, []string{"s1:26379", "s2:26379", "s3:6379"}) || o.DB != 3 ||
				o.Username != "u" || o.Password != "pw" || o.SentinelUsername != "" || o.SentinelPassword != "spw" ||
				!o.ContextTimeoutEnabled || o.MaxRetries != -1 || o.DialTimeout != time.Second || o.DialerRetries != 1 || o.TLSConfig != nil {
				t.Fatalf("options = %+v", o)
			}
		}},
		{"rediss+sentinel://s1:26379/my%20master", func(t *testing.T, c redis.UniversalClient) {
			o, err := sentinelOptions("rediss+sentinel://s1:26379/my%20master")
			if err != nil {
				t.Fatal(err)
			}
			if o.MasterName != "my master" || o.DB != 0 || o.TLSConfig == nil || o.TLSConfig.ServerName != "" {
				t.Fatalf("options = %+v", o)
			}
		}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			c, err := newURLClient(tc.url)
			if err != nil {
				t.Fatalf("newURLClient(%q) = %v", tc.url, err)
			}
			defer c.Close()
			tc.want(t, c)
		})
	}
}

// redactURL hides userinfo and password parameters, and shows the rest.
func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://u:pw@h:6379/0", "redis://xxxxx@h:6379/0"},
		{"redis+sentinel://h1:1,h2:2/mymaster/1?sentinel_password=pw&dial_timeout=2s&read_timeout=1.5", "redis+sentinel://h1:1,h2:2/mymaster/1?sentinel_password=xxxxx&dial_timeout=2s&read_timeout=1.5"},
		{"redis+cluster://h:1?route_randomly=true&client_name=hunter2", "redis+cluster://h:1?route_randomly=true&client_name=…"},
		{"unix:///run/redis.sock", "unix:///run/redis.sock"},
		{"redis://h:1/0?x=a@b", "redis://xxxxx@b"},
		{"nope", "…"},
	} {
		if got := redactURL(tc.in); got != tc.want {
			t.Errorf("redactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Whatever the password and whatever follows it, under every scheme, no
// part of it appears in the error, and the parser never panics.
func FuzzRedisURL(f *testing.F) {
	for _, s := range [][2]string{{"hun/ter2", "host:6379/0"}, {"hunter2", "host:hunter2"}, {"a?b#c@d", "[::1]:1/0"}, {"x", "h:99999"}, {"", ""},
		{"p", "a:1,b:2/m/0?dial_timeout=1"}, {"p", "a:1,b:2/m?sentinel_password=z"}, {"p@q", ",/"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, password, tail string) {
		const head, end = "Q7zqSECRET", "SECRETZ9zw"
		if strings.Contains(tail, "SECRET") || strings.Contains(tail, "Q7zq") || strings.Contains(tail, "Z9zw") || (len(password) >= 6 && strings.Contains(tail, password)) {
			t.Skip("the tail itself holds a marker")
		}
		secret := head + password + end
		for _, scheme := range []string{"redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"} {
			for _, raw := range []string{scheme + "://:" + secret + "@" + tail, scheme + "://user:" + secret + "@" + tail, scheme + "://" + secret + "@" + tail} {
				err := parseURL(raw)
				if err == nil {
					continue
				}
				if !errors.Is(err, ErrURL) {
					t.Fatalf("%q: error %q does not wrap ErrURL", raw, err)
				}
				if msg := err.Error(); strings.Contains(msg, "SECRET") || strings.Contains(msg, "Q7zq") || strings.Contains(msg, "Z9zw") ||
					(len(password) >= 6 && strings.Contains(msg, password)) {
					t.Fatalf("%q: error %q quotes the password", raw, msg)
				}
			}
		}
	})
}

// parseURL parses raw as newURLClient does, without making a client.
func parseURL(raw string) error {
	var err error
	switch scheme, _, _ := strings.Cut(raw, "://"); scheme {
	case "redis+cluster", "rediss+cluster":
		_, err = clusterOptions(raw)
	case "redis+sentinel", "rediss+sentinel":
		_, err = sentinelOptions(raw)
	default:
		_, err = redisOptions(raw)
	}
	return err
}
