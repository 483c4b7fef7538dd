package redisstore

import (
	"errors"
	"strings"
	"testing"
)

// The error of a malformed Redis URL names scheme, host and port, never
// the password, whatever the password holds.
func TestRedisURLErrorNeverQuotesThePassword(t *testing.T) {
	for _, tc := range []struct {
		url    string
		secret string
		want   string // the error, exactly
	}{
		{"redis://:hunter2@127.0.0.1:notaport", "hunter2",
			"redis URL (scheme redis, host 127.0.0.1): not a Redis URL: the port is not a number from 1 to 65535; percent-encode / ? # @ in a password"},
		{"redis://default:hunter2", "hunter2",
			"redis URL (scheme redis, host default): not a Redis URL: the port is not a number from 1 to 65535; percent-encode / ? # @ in a password"},
		{"redis://:hunter2@host:6379/notadb", "hunter2",
			"redis URL (scheme redis, host host, port 6379): not a Redis URL: want redis://[user:password@]host:port/db, with / ? # @ in a password percent-encoded"},
		{"redis://:hun/ter2@redis.internal:6379/0", "ter2",
			"redis URL (scheme redis, host redis.internal, port 6379): not a Redis URL: want redis://[user:password@]host:port/db, with / ? # @ in a password percent-encoded"},
		{"redis://:hunter2/@redis.internal:6379/0", "hunter2", "host redis.internal, port 6379"},
		{"redis://:9/8/hunter2@10.0.0.5:6380/0", "hunter2", "host 10.0.0.5, port 6380"},
		{"redis://:hun?ter2@[2001:db8::1]:6379/0", "ter2", "host [2001:db8::1], port 6379"},
		{"redis://:hun#ter2@h:6379", "ter2", "host h, port 6379"},
		{"redis://:p@ss/word@h:6379/0", "ss/word", "host h, port 6379"},
		{"rediss://user:hunter2@h:6379/0?dial_timeout=hunter2", "hunter2", "scheme rediss, host h, port 6379"},
		{"redis://:%zzhunter2@h:6379", "hunter2", "host h, port 6379"},
		{"http://:hunter2@h", "hunter2", "redis URL: not a Redis URL: want redis://[user:password@]host:port/db, rediss://… or unix://…"},
		{":hunter2@h:6379", "hunter2", "redis URL: not a Redis URL"},
		{"unix://:hunter2@/tmp/x.sock?db=x", "hunter2", "redis URL (scheme unix): not a Redis URL"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := Dial(tc.url, Options{})
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), tc.secret) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\nwant one containing %q, wrapping ErrURL, without %q", err, tc.want, tc.secret)
			}
			if !errors.Is(err, ErrURL) {
				t.Fatalf("Dial(%q) = %v, want an error wrapping ErrURL", tc.url, err)
			}
		})
	}
}

// Whatever the password, no part of it appears in the error.
func FuzzRedisURLError(f *testing.F) {
	for _, s := range [][2]string{{"hun/ter2", "host:6379/0"}, {"hunter2", "host:hunter2"}, {"a?b#c@d", "[::1]:1/0"}, {"x", "h:99999"}, {"", ""}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, password, tail string) {
		const head, end = "Q7zqSECRET", "SECRETZ9zw"
		if strings.Contains(tail, "SECRET") || strings.Contains(tail, "Q7zq") || strings.Contains(tail, "Z9zw") || (len(password) >= 6 && strings.Contains(tail, password)) {
			t.Skip("the tail itself holds a marker")
		}
		secret := head + password + end
		for _, raw := range []string{"redis://:" + secret + "@" + tail, "redis://user:" + secret + "@" + tail, "rediss://" + secret + "@" + tail, "unix://:" + secret + "@" + tail} {
			_, err := redisOptions(raw)
			if err == nil {
				continue
			}
			if msg := err.Error(); strings.Contains(msg, "SECRET") || strings.Contains(msg, "Q7zq") || strings.Contains(msg, "Z9zw") ||
				(len(password) >= 6 && strings.Contains(msg, password)) {
				t.Fatalf("%q: error %q quotes the password", raw, msg)
			}
		}
	})
}
