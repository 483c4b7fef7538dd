package envconfig

import (
	"strconv"
	"time"

	protect "github.com/httpprotect/protect"
)

// The challenge's variables: CHALLENGE (true or false) turns it on with
// protect's defaults, and each of the others turns it on with its field
// set. CHALLENGE=false with any of them set is an error.
var challengeVars = []envVar{
	{"CHALLENGE", "Challenge", func(c *settings, v string) error {
		var on bool
		if err := envBool(func(*settings) *bool { return &on })(c, v); err != nil {
			return err
		}
		c.challengeOff = !on
		if on {
			c.challenge()
		}
		return nil
	}},
	{"CHALLENGE_AFTER", "Challenge.After", envNonZero("a count of at least MAX_REQUESTS; unset, it is MAX_REQUESTS",
		envInt(func(c *settings) *int64 { return &c.challenge().After }))},
	{"CHALLENGE_SECRET", "Challenge.Secret", func(c *settings, v string) error {
		c.challenge().Secret = []byte(v) // its length: ChallengeConfig's check
		return nil
	}},
	{"CHALLENGE_DIFFICULTY", "Challenge.Difficulty", envNonZero("1 to 32 leading zero bits",
		envSmall(func(c *settings) *int { return &c.challenge().Difficulty }))},
	{"CHALLENGE_PASS_TTL", "Challenge.PassTTL", envPositive(func(c *settings) *time.Duration { return &c.challenge().PassTTL })},
}

// challenge returns the settings' ChallengeConfig, made when the first
// challenge variable is read.
func (c *settings) challenge() *protect.ChallengeConfig {
	if c.Challenge == nil {
		c.Challenge = &protect.ChallengeConfig{}
	}
	return c.Challenge
}

// challengeErrors says what is wrong with the challenge variables
// together, once each has parsed.
func challengeErrors(prefix string, c *settings, vars map[string]string) []error {
	if c.challengeOff && c.Challenge != nil {
		return []error{configErr("%sCHALLENGE=%q, and %sCHALLENGE_* variables are set: unset them, or turn the challenge on",
			prefix, vars["CHALLENGE"], prefix)}
	}
	return nil
}

// shown is how an error shows the value v of the variable name: quoted,
// except a secret's, which an error never holds.
func shown(name, v string) string {
	if name == "CHALLENGE_SECRET" {
		return "(not shown)"
	}
	return strconv.Quote(v)
}
