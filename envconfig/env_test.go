package envconfig

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/redisstore"
)

func TestReadReadsEveryName(t *testing.T) {
	env := []string{
		"HTTP_PROTECT_TTL=15",
		"HTTP_PROTECT_MAX_REQUESTS=50",
		"HTTP_PROTECT_BAN_LIMIT=-1",
		"HTTP_PROTECT_REDIS_URL=redis://127.0.0.1:6379/0",
		"HTTP_PROTECT_BAN_DURATION=2d12h",
		"HTTP_PROTECT_BAN_FACTOR=3",
		"HTTP_PROTECT_MAX_BAN_DURATION=30d",
		"HTTP_PROTECT_OFFENSE_WINDOW=3600",
		"HTTP_PROTECT_TRUSTED_PROXIES=10.0.0.0/8, 192.0.2.15",
		"HTTP_PROTECT_PROXY_HEADER=X-Real-IP",
		"HTTP_PROTECT_PROXY_COUNT=2",
		"HTTP_PROTECT_TRUST_UNIX_SOCKET=true",
		"HTTP_PROTECT_IPV4_PREFIX=24",
		"HTTP_PROTECT_IPV6_PREFIX=56",
		"HTTP_PROTECT_ESCALATION_THRESHOLD=4",
		"HTTP_PROTECT_IPV6_ESCALATION=48",
		"HTTP_PROTECT_IPV4_ESCALATION=16",
		"HTTP_PROTECT_SAFE_NETWORKS=192.0.2.0/24",
		"HTTP_PROTECT_BLOCKLIST_DIR=/var/lib/protect",
		"HTTP_PROTECT_BLOCKLISTS=spamhaus:https://www.spamhaus.org/drop/drop.txt",
		"HTTP_PROTECT_NAMESPACE=api:",
		"HTTP_PROTECT_BAN_NAMESPACE=bans:",
		"HTTP_PROTECT_NAME=api",
		"HTTP_PROTECT_ON_STORE_ERROR=closed",
		"HTTP_PROTECT_STORE_TIMEOUT=50ms",
		"HTTP_PROTECT_DRY_RUN=true",
		"HTTP_PROTECT_BAN_STATUS=429",
		"HTTP_PROTECT_UNKNOWN_STATUS=400",
		"HTTP_PROTECT_REDIS_WAIT_REPLICAS=1",
		"HTTP_PROTECT_REDIS_WAIT_TIMEOUT=20ms",
		"HTTP_PROTECT_CHALLENGE=true",
		"HTTP_PROTECT_CHALLENGE_AFTER=60",
		"HTTP_PROTECT_CHALLENGE_SECRET=0123456789abcdef",
		"HTTP_PROTECT_CHALLENGE_DIFFICULTY=12",
		"HTTP_PROTECT_CHALLENGE_PASS_TTL=30m",
		"PATH=/usr/bin",
		"=C:=C:\\",
	}
	c, err := Read(env, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := protect.Config{
		TTL: 15 * time.Second, MaxRequests: 50, BanLimit: -1,
		BanDuration: 60 * time.Hour, BanFactor: 3, MaxBanDuration: 30 * 24 * time.Hour, OffenseWindow: time.Hour,
		ProxyHeader: "X-Real-IP", ProxyCount: 2, TrustUnixSocket: true, IPv4Prefix: 24, IPv6Prefix: 56,
		EscalationThreshold: 4, IPv6Escalation: []int{48}, IPv4Escalation: []int{16},
		Namespace: "api:", BanNamespace: "bans:", Name: "api", OnStoreError: protect.FailClosed, StoreTimeout: 50 * time.Millisecond, DryRun: true,
		BanStatus: 429, UnknownStatus: 400,
		Challenge:  &protect.ChallengeConfig{After: 60, Secret: []byte("0123456789abcdef"), Difficulty: 12, PassTTL: 30 * time.Minute},
		BlockLists: []protect.BlockList{{Name: "drop", URL: "https://www.spamhaus.org/drop/drop.txt", Format: protect.FormatSpamhaus, Cache: "/var/lib/protect/drop.cache"}},
	}
	if len(c.TrustedProxies) != 2 || c.TrustedProxies[1] != "192.0.2.15" || len(c.SafeNetworks) != 1 || c.SafeNetworks[0] != "192.0.2.0/24" {
		t.Fatalf("Read(env).TrustedProxies, SafeNetworks = %q, %q; want two proxies ending in 192.0.2.15, and 192.0.2.0/24", c.TrustedProxies, c.SafeNetworks)
	}
	c.TrustedProxies, c.SafeNetworks = nil, nil
	store, ok := c.Store.(*redisstore.Store)
	if !ok || store.Addr() != "127.0.0.1:6379" {
		t.Fatalf("Read(env).Store = %T, want a *redisstore.Store for 127.0.0.1:6379", c.Store)
	}
	store.Close()
	c.Store = nil
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("Read(env) =\n%+v\nwant\n%+v", c, want)
	}
	// STATE_FILE is tested apart (statefile_test.go): it excludes REDIS_URL.
	if len(env)-2+1 != len(Names()) {
		t.Fatalf("len(Names()) = %d, want %d, the names this test sets: test every name", len(Names()), len(env)-2+1)
	}
}

func TestReadErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix string
		own    []string
		env    []string
		want   []string // in the error, each
	}{
		{"typo names the nearest", "", nil, []string{"HTTP_PROTECT_MAX_REQUEST=5"},
			[]string{"HTTP_PROTECT_MAX_REQUEST: not a setting; did you mean HTTP_PROTECT_MAX_REQUESTS?"}},
		{"unknown, nothing near", "", nil, []string{"HTTP_PROTECT_COLOUR=blue"},
			[]string{"HTTP_PROTECT_COLOUR: not a setting (a name"}},
		{"empty value is still a typo", "", nil, []string{"HTTP_PROTECT_BANLIMIT="},
			[]string{"did you mean HTTP_PROTECT_BAN_LIMIT?"}},
		{"own name suggested", "", []string{"LISTEN"}, []string{"HTTP_PROTECT_LISTN=:80"},
			[]string{"did you mean HTTP_PROTECT_LISTEN?"}},
		{"second prefix's names not declared", "", nil, []string{"HTTP_PROTECT_LOGIN_TTL=1m"},
			[]string{"HTTP_PROTECT_LOGIN_TTL: not a setting"}},
		{"bad integer", "", nil, []string{"HTTP_PROTECT_MAX_REQUESTS=abc"}, []string{`HTTP_PROTECT_MAX_REQUESTS="abc": want an integer`}},
		{"bad duration", "", nil, []string{"HTTP_PROTECT_TTL=soon"}, []string{`HTTP_PROTECT_TTL="soon": want a duration`}},
		{"negative duration", "", nil, []string{"HTTP_PROTECT_TTL=-5s"}, []string{`HTTP_PROTECT_TTL="-5s"`}},
		{"bare negative seconds", "", nil, []string{"HTTP_PROTECT_TTL=-5"}, []string{`HTTP_PROTECT_TTL="-5"`}},
		{"float syntax not a duration", "", nil, []string{"HTTP_PROTECT_TTL=1e3"}, []string{`HTTP_PROTECT_TTL="1e3"`}},
		{"bad bool", "", nil, []string{"HTTP_PROTECT_DRY_RUN=maybe"}, []string{`HTTP_PROTECT_DRY_RUN="maybe": want true or false`}},
		{"bad policy", "", nil, []string{"HTTP_PROTECT_ON_STORE_ERROR=sometimes"}, []string{`HTTP_PROTECT_ON_STORE_ERROR="sometimes"`}},
		{"bad prefix length", "", nil, []string{"HTTP_PROTECT_IPV6_PREFIX=6x4"}, []string{`HTTP_PROTECT_IPV6_PREFIX="6x4"`}},
		{"int overflow in an int field", "", nil, []string{"HTTP_PROTECT_PROXY_COUNT=99999999999"}, []string{`HTTP_PROTECT_PROXY_COUNT="99999999999"`}},
		{"bad factor", "", nil, []string{"HTTP_PROTECT_BAN_FACTOR=double"}, []string{`HTTP_PROTECT_BAN_FACTOR="double": want a number`}},
		{"store timeout trap", "", nil, []string{"HTTP_PROTECT_STORE_TIMEOUT=100"},
			[]string{`HTTP_PROTECT_STORE_TIMEOUT="100": 1m40s is longer than a store call may take (at most 10s); a bare number is seconds: did you mean 100ms?`}},
		{"store timeout too long with a unit", "", nil, []string{"HTTP_PROTECT_STORE_TIMEOUT=1m"}, []string{`HTTP_PROTECT_STORE_TIMEOUT="1m": 1m0s is longer`}},
		{"every problem at once", "", nil, []string{"HTTP_PROTECT_TTL=x", "HTTP_PROTECT_MAX_REQUESTS=y", "HTTP_PROTECT_MAXREQUESTS=5"},
			[]string{`HTTP_PROTECT_TTL="x"`, `HTTP_PROTECT_MAX_REQUESTS="y"`, "HTTP_PROTECT_MAXREQUESTS: not a setting"}},
		{"explicit zero TTL", "", nil, []string{"HTTP_PROTECT_TTL=0"}, []string{`HTTP_PROTECT_TTL="0": 0 is not a duration this setting can have: unset it for the default`}},
		{"explicit zero counts", "", nil, []string{"HTTP_PROTECT_MAX_REQUESTS=0", "HTTP_PROTECT_BAN_LIMIT=0", "HTTP_PROTECT_BAN_FACTOR=0", "HTTP_PROTECT_IPV6_PREFIX=0"},
			[]string{`HTTP_PROTECT_MAX_REQUESTS="0": 0: want a count of at least 1`, `HTTP_PROTECT_BAN_LIMIT="0": 0: want a count of at least 1, or -1 to turn bans off`,
				`HTTP_PROTECT_BAN_FACTOR="0": 0 is no factor`, `HTTP_PROTECT_IPV6_PREFIX="0": 0: want a prefix length from 1 to 128`}},
		{"store timeout below 1ms", "", nil, []string{"HTTP_PROTECT_STORE_TIMEOUT=1ns"}, []string{`HTTP_PROTECT_STORE_TIMEOUT="1ns": want at least 1ms`}},
		{"trust every IPv4 peer", "", nil, []string{"HTTP_PROTECT_TRUSTED_PROXIES=10.0.0.1, 0.0.0.0/0"},
			[]string{`HTTP_PROTECT_TRUSTED_PROXIES="10.0.0.1, 0.0.0.0/0": 0.0.0.0/0 covers every address of its family; write !0.0.0.0/0 if that is meant`}},
		{"every IPv6 client safe", "", nil, []string{"HTTP_PROTECT_SAFE_NETWORKS=::/0"}, []string{`HTTP_PROTECT_SAFE_NETWORKS="::/0": ::/0 covers every address`}},
		{"every mapped IPv4 client safe", "", nil, []string{"HTTP_PROTECT_SAFE_NETWORKS=::ffff:0:0/96"}, []string{`::ffff:0:0/96 covers every address`}},
		{"a validation error under the variable's name", "", nil, []string{"HTTP_PROTECT_BAN_FACTOR=0.5"},
			[]string{`HTTP_PROTECT_BAN_FACTOR="0.5": must be a number of at least 1`}},
		{"a bad list entry under the variable's name", "", nil, []string{"HTTP_PROTECT_TRUSTED_PROXIES=10.0.0.1/8"},
			[]string{`HTTP_PROTECT_TRUSTED_PROXIES="10.0.0.1/8": entry "10.0.0.1/8": host bits set; did you mean 10.0.0.0/8?`}},
		{"a default named as what it is", "", nil, []string{"HTTP_PROTECT_BAN_DURATION=30d"},
			[]string{`HTTP_PROTECT_MAX_BAN_DURATION (unset, so 168h0m0s): shorter than HTTP_PROTECT_BAN_DURATION 720h0m0s`}},
		{"parse and validation errors at once", "", nil, []string{"HTTP_PROTECT_TTL=x", "HTTP_PROTECT_BAN_FACTOR=0.5", "HTTP_PROTECT_IPV4_PREFIX=40"},
			[]string{`HTTP_PROTECT_TTL="x": want a duration`, `HTTP_PROTECT_BAN_FACTOR="0.5": must be`, `HTTP_PROTECT_IPV4_PREFIX="40": want 1 to 32`}},
		{"other prefix", "HTTP_PROTECT_LOGIN_", nil, []string{"HTTP_PROTECT_LOGIN_TLL=5"}, []string{"did you mean HTTP_PROTECT_LOGIN_TTL?"}},
		{"lower-case prefix", "http_protect_", nil, nil, []string{`environment prefix "http_protect_"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Prefix: tc.prefix, Own: tc.own}
			_, err := Read(tc.env, opts)
			if !errors.Is(err, protect.ErrConfig) {
				t.Fatalf("Read(%q, %+v) = %v, want ErrConfig", tc.env, opts, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Read(%q, %+v) = %q\nwant it to contain %q", tc.env, opts, err, w)
				}
			}
		})
	}
}

func TestReadDurations(t *testing.T) {
	// One syntax for every duration variable: a bare number is seconds.
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{
		{"10", 10 * time.Second},
		{"0.5", 500 * time.Millisecond},
		{"3600", time.Hour},
		{"90s", 90 * time.Second},
		{"100ms", 100 * time.Millisecond},
		{"2d12h", 60 * time.Hour},
		{" 7d ", 7 * 24 * time.Hour},
	} {
		for _, name := range []string{"TTL", "BAN_DURATION", "MAX_BAN_DURATION", "OFFENSE_WINDOW", "STORE_TIMEOUT"} {
			if name == "STORE_TIMEOUT" && tc.want > maxEnvStoreTimeout {
				continue
			}
			env := []string{Prefix + name + "=" + tc.v}
			if name == "MAX_BAN_DURATION" { // no shorter than BAN_DURATION
				env = append(env, Prefix+"BAN_DURATION=1ms")
			}
			c, err := Read(env, Options{})
			if err != nil {
				t.Fatalf("Read(%q) = %v, want nil", env, err)
			}
			got := map[string]time.Duration{"TTL": c.TTL, "BAN_DURATION": c.BanDuration, "MAX_BAN_DURATION": c.MaxBanDuration,
				"OFFENSE_WINDOW": c.OffenseWindow, "STORE_TIMEOUT": c.StoreTimeout}[name]
			if got != tc.want {
				t.Errorf("Read(%s=%q): %s = %v, want %v", name, tc.v, name, got, tc.want)
			}
		}
	}
}

func TestReadPrefixes(t *testing.T) {
	env := []string{
		"HTTP_PROTECT_MAX_REQUESTS=100",
		"HTTP_PROTECT_LISTEN=127.0.0.1:8089",
		"HTTP_PROTECT_PLANS=/etc/plans.json",
		"HTTP_PROTECT_LOGIN_MAX_REQUESTS=5",
		"HTTP_PROTECT_LOGIN_TTL=1m",
	}
	api, err := Read(env, Options{Own: []string{"LISTEN", "PLANS", "LOGIN_*"}})
	if err != nil || api.MaxRequests != 100 || api.TTL != 0 {
		t.Fatalf("Read(env, Own LISTEN, PLANS, LOGIN_*) = MaxRequests %d, TTL %v, %v; want 100, 0, nil", api.MaxRequests, api.TTL, err)
	}
	login, err := Read(env, Options{Prefix: "HTTP_PROTECT_LOGIN_"})
	if err != nil || login.MaxRequests != 5 || login.TTL != time.Minute {
		t.Fatalf("Read(env, Prefix HTTP_PROTECT_LOGIN_) = MaxRequests %d, TTL %v, %v; want 5, 1m, nil", login.MaxRequests, login.TTL, err)
	}
	if _, err := Read(env, Options{Own: []string{"LISTEN"}}); err == nil ||
		!strings.Contains(err.Error(), "HTTP_PROTECT_PLANS: not a setting") || !strings.Contains(err.Error(), "HTTP_PROTECT_LOGIN_TTL: not a setting") {
		t.Fatalf("Read(env, Own LISTEN) = %v, want an error naming HTTP_PROTECT_PLANS and HTTP_PROTECT_LOGIN_TTL as undeclared", err)
	}
}

func TestFromEnvUsesTheProcessEnvironment(t *testing.T) {
	t.Setenv("HTTP_PROTECT_MAX_REQUESTS", "7")
	t.Setenv("HTTP_PROTECT_LISTEN", ":8089")
	if c, err := FromEnv("LISTEN"); err != nil || c.MaxRequests != 7 {
		t.Fatalf("FromEnv(LISTEN) = MaxRequests %d, %v; want 7, nil", c.MaxRequests, err)
	}
	if _, err := FromEnv(); err == nil {
		t.Fatal("FromEnv() with HTTP_PROTECT_LISTEN set = nil error, want an error: it is not declared")
	}
}

// Whatever the environment holds, reading it returns a config or an error
// that wraps ErrConfig, and a bare number is always seconds.
func FuzzRead(f *testing.F) {
	for _, s := range [][2]string{{"TTL", "10"}, {"STORE_TIMEOUT", "100"}, {"MAX_REQUEST", "5"}, {"TTL", "2d12h"},
		{"BAN_FACTOR", "NaN"}, {"TTL", "0.000000001"}, {"TTL", "99999999999999999"}, {"LOGIN_TTL", "1"}, {"", ""}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, v string) {
		c, err := Read([]string{Prefix + name + "=" + v}, Options{Own: []string{"LOGIN_*"}})
		if err != nil {
			if !errors.Is(err, protect.ErrConfig) {
				t.Fatalf("Read(%s=%q) = %v, want an error wrapping ErrConfig", name, v, err)
			}
			return
		}
		if name == "TTL" && bareNumber(strings.TrimSpace(v)) {
			if want, err := time.ParseDuration(strings.TrimSpace(v) + "s"); err != nil || want != c.TTL {
				t.Fatalf("Read(TTL=%q).TTL = %v, want %v seconds", v, c.TTL, v)
			}
		}
	})
}

// A name that is a setting under a longer prefix (HTTP_PROTECT_LOGIN_
// read by a second protector) is not a typo of that setting: the message
// says how to declare the second prefix's names, and does not send the
// user to the first protector's setting, which would change its limit.
func TestReadSecondPrefixHint(t *testing.T) {
	for _, tc := range []struct {
		env     string
		want    string
		notWant string
	}{
		{"HTTP_PROTECT_LOGIN_MAX_REQUESTS=5", `declare "LOGIN_*"`, "did you mean HTTP_PROTECT_MAX_REQUESTS"},
		{"HTTP_PROTECT_API_V2_BAN_LIMIT=5", `declare "API_V2_*"`, "did you mean HTTP_PROTECT_BAN_LIMIT"},
		{"HTTP_PROTECT_LOGIN_TTL=1m", `declare "LOGIN_*"`, "did you mean"},
		{"HTTP_PROTECT_LOGIN_MAX_BAN_DURATION=1h", `declare "LOGIN_*"`, `"LOGIN_MAX_*"`},
		{"HTTP_PROTECT_MAX_REQUEST=5", "did you mean HTTP_PROTECT_MAX_REQUESTS?", `declare "`},
	} {
		t.Run(tc.env, func(t *testing.T) {
			_, err := Read([]string{tc.env}, Options{})
			if err == nil {
				t.Fatalf("Read(%q) = nil error, want one", tc.env)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read(%q) = %q\nwant it to contain %q", tc.env, err, tc.want)
			}
			if strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("Read(%q) = %q\nwant it not to contain %q", tc.env, err, tc.notWant)
			}
		})
	}
}

// TestReadLists: none is the empty list (not unset), and a whole
// address family is taken when written with a "!".
func TestReadLists(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want []string
	}{
		{"none", []string{}},
		{"NONE", []string{}},
		{"!0.0.0.0/0, !::/0", []string{"0.0.0.0/0", "::/0"}},
		{"10.0.0.0/8, ! 192.0.2.0/24", []string{"10.0.0.0/8", "192.0.2.0/24"}},
	} {
		c, err := Read([]string{Prefix + "TRUSTED_PROXIES=" + tc.v, Prefix + "SAFE_NETWORKS=" + tc.v}, Options{})
		if err != nil || !reflect.DeepEqual(c.TrustedProxies, tc.want) || !reflect.DeepEqual(c.SafeNetworks, tc.want) {
			t.Errorf("Read(TRUSTED_PROXIES and SAFE_NETWORKS=%q) = %#v, %#v, %v; want %#v, nil", tc.v, c.TrustedProxies, c.SafeNetworks, err, tc.want)
		}
	}
}
