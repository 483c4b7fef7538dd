package envconfig

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/redisstore"
)

// REDIS_WAIT_REPLICAS and REDIS_WAIT_TIMEOUT set redisstore's
// Options.WaitReplicas and WaitTimeout: a count is acknowledged only once
// that many replicas have it, so that a master's death loses none
// (docs/redis.md, "Failover").

// redisWait is what the two variables set; set says which were.
type redisWait struct {
	replicas    int
	timeout     time.Duration
	replicasSet bool
	timeoutSet  bool
}

func envWaitReplicas(c *settings, v string) error {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return errEnvValue("want a count of replicas: 0 waits for none, 1 or more waits for that many")
	}
	c.redisWait.replicas, c.redisWait.replicasSet = int(n), true
	return nil
}

func envWaitTimeout(c *settings, v string) error {
	d, err := EnvDuration(v)
	if err != nil {
		return err
	}
	if d < time.Millisecond {
		// WAIT's own 0 is "for ever", and it counts milliseconds.
		return errEnvValue("want at least 1ms: WAIT counts milliseconds")
	}
	c.redisWait.timeout, c.redisWait.timeoutSet = d, true
	return nil
}

// redisWaitErrors checks the two variables against the rest of the
// settings, once every variable is read: they need a Redis URL and each
// other, and the store waits at most half a call's StoreTimeout (so that
// WAIT answers before the call's deadline), so a longer timeout would
// not be what it says.
func redisWaitErrors(prefix string, c *settings, vars map[string]string, opts Options) []error {
	w := c.redisWait
	replicas := w.redisOptions(opts.Redis).WaitReplicas
	var errs []error
	quoted := func(name string) string {
		return fmt.Sprintf("%s%s=%q", prefix, name, strings.TrimSpace(vars[name]))
	}
	if w.replicasSet && w.replicas > 0 && c.redisURL == "" && opts.RedisURL == "" {
		errs = append(errs, configErr("%s: no Redis to wait for: set %sREDIS_URL", quoted("REDIS_WAIT_REPLICAS"), prefix))
	}
	switch {
	case w.timeoutSet && w.replicasSet && w.replicas == 0:
		errs = append(errs, configErr("%s: waits for nothing: %s waits for no replica", quoted("REDIS_WAIT_TIMEOUT"), quoted("REDIS_WAIT_REPLICAS")))
	case w.timeoutSet && replicas <= 0:
		errs = append(errs, configErr("%s: waits for nothing without %sREDIS_WAIT_REPLICAS of 1 or more", quoted("REDIS_WAIT_TIMEOUT"), prefix))
	}
	store, storeSet := c.StoreTimeout, true
	if store == 0 {
		store, storeSet = protect.DefaultStoreTimeout, false
	}
	if w.timeoutSet && w.timeout > store/2 {
		of := fmt.Sprintf("%sSTORE_TIMEOUT %v", prefix, store)
		if !storeSet {
			of = fmt.Sprintf("%sSTORE_TIMEOUT (unset, so %v)", prefix, store)
		}
		msg := fmt.Sprintf("%s: %v is longer than half of %s, the most the store waits, so that WAIT answers before the call's deadline", quoted("REDIS_WAIT_TIMEOUT"), w.timeout, of)
		if bareNumber(strings.TrimSpace(vars["REDIS_WAIT_TIMEOUT"])) {
			msg += fmt.Sprintf("; a bare number is seconds: did you mean %sms?", strings.TrimSpace(vars["REDIS_WAIT_TIMEOUT"]))
		}
		errs = append(errs, configErr("%s", msg))
	}
	return errs
}

// redisOptions returns opt with what the two variables set.
func (w redisWait) redisOptions(opt redisstore.Options) redisstore.Options {
	if w.replicasSet {
		opt.WaitReplicas = w.replicas
	}
	if w.timeoutSet {
		opt.WaitTimeout = w.timeout
	}
	return opt
}
