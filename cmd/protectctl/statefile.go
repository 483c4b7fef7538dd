package main

import (
	"strings"

	"github.com/httpprotect/protect/envconfig"
)

const envStateFile = envconfig.Prefix + "STATE_FILE"

// withoutStateFile returns environ without HTTP_PROTECT_STATE_FILE, and
// that variable's value. protectctl never opens a service's state file:
// the running service holds it locked, and a stopped one would find its
// file changed behind it.
func withoutStateFile(environ []string) (env []string, path string) {
	env = make([]string, 0, len(environ))
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, envStateFile+"="); ok {
			path = strings.TrimSpace(v)
			continue
		}
		env = append(env, kv)
	}
	return env, path
}

// stateFileError is the usage error of protectctl run where the service
// keeps its bans in a state file and no Redis is given.
func stateFileError(path string) error {
	return usagef("no store: %s=%s is the service's own file, held locked by the running service; protectctl does not open it: reach the service through its admin API (-server URL, or HTTP_PROTECT_ADMIN_URL), or give -redis URL for a service on Redis", envStateFile, path)
}
