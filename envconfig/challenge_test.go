package envconfig

import (
	"reflect"
	"strings"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
)

func TestChallengeFromEnv(t *testing.T) {
	secret := strings.Repeat("s", 32)
	tests := []struct {
		name string
		env  []string
		want *protect.ChallengeConfig
	}{
		{"unset", nil, nil},
		{"off", []string{"HTTP_PROTECT_CHALLENGE=false"}, nil},
		{"on with the defaults", []string{"HTTP_PROTECT_CHALLENGE=true"}, &protect.ChallengeConfig{}},
		{"every field", []string{"HTTP_PROTECT_CHALLENGE_AFTER=150", "HTTP_PROTECT_CHALLENGE_SECRET=" + secret,
			"HTTP_PROTECT_CHALLENGE_DIFFICULTY=12", "HTTP_PROTECT_CHALLENGE_PASS_TTL=30m"},
			&protect.ChallengeConfig{After: 150, Secret: []byte(secret), Difficulty: 12, PassTTL: 30 * time.Minute}},
		{"one field turns it on", []string{"HTTP_PROTECT_CHALLENGE_DIFFICULTY=10"}, &protect.ChallengeConfig{Difficulty: 10}},
	}
	for _, tt := range tests {
		c, err := Read(append([]string{"HTTP_PROTECT_MAX_REQUESTS=100", "HTTP_PROTECT_BAN_LIMIT=300"}, tt.env...), Options{})
		if err != nil {
			t.Errorf("%s: Read = %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(c.Challenge, tt.want) {
			t.Errorf("%s: Challenge = %+v, want %+v", tt.name, c.Challenge, tt.want)
		}
	}
}

func TestChallengeFromEnvErrors(t *testing.T) {
	tests := []struct {
		env  string
		want string
	}{
		{"HTTP_PROTECT_CHALLENGE=maybe", `HTTP_PROTECT_CHALLENGE="maybe": want true or false`},
		{"HTTP_PROTECT_CHALLENGE_AFTER=0", `HTTP_PROTECT_CHALLENGE_AFTER="0": 0: want a count of at least MAX_REQUESTS`},
		{"HTTP_PROTECT_CHALLENGE_AFTER=50", `HTTP_PROTECT_CHALLENGE_AFTER="50": below HTTP_PROTECT_MAX_REQUESTS 100`},
		{"HTTP_PROTECT_CHALLENGE_AFTER=300", `HTTP_PROTECT_CHALLENGE_AFTER="300": at or past HTTP_PROTECT_BAN_LIMIT 300`},
		{"HTTP_PROTECT_CHALLENGE_DIFFICULTY=40", `HTTP_PROTECT_CHALLENGE_DIFFICULTY="40": want 1 to 32`},
		{"HTTP_PROTECT_CHALLENGE_DIFFICULTY=hard", `HTTP_PROTECT_CHALLENGE_DIFFICULTY="hard": want an integer`},
		{"HTTP_PROTECT_CHALLENGE_PASS_TTL=0", `HTTP_PROTECT_CHALLENGE_PASS_TTL="0": 0 is not a duration`},
		{"HTTP_PROTECT_CHALLENGE_PASS_TTL=soon", `HTTP_PROTECT_CHALLENGE_PASS_TTL="soon": want a duration`},
		{"HTTP_PROTECT_CHALLENGE_SECRET=short-secret", `HTTP_PROTECT_CHALLENGE_SECRET=(not shown): 12 bytes: want at least 16, such as the output of openssl rand -hex 32`},
		{"HTTP_PROTECT_CHALLENGE_SECRET=" + strings.Repeat("s", 16) + "\nHTTP_PROTECT_CHALLENGE=false", `HTTP_PROTECT_CHALLENGE="false", and HTTP_PROTECT_CHALLENGE_* variables are set`},
	}
	for _, tt := range tests {
		env := append([]string{"HTTP_PROTECT_MAX_REQUESTS=100", "HTTP_PROTECT_BAN_LIMIT=300"}, strings.Split(tt.env, "\n")...)
		_, err := Read(env, Options{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Read(%q) = %v, want an error with %q", tt.env, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "short-secret") {
			t.Errorf("Read(%q) = %v: the error shows the secret", tt.env, err)
		}
	}
}
