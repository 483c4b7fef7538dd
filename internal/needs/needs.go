// Package needs is how a test asks for a real server or tool that this
// machine may lack: without it the test skips with a message, and fails
// when the CI environment variable is set, since .ci/run installs
// everything and a skip there would hide a test that never ran.
package needs

import (
	"os"
	"os/exec"
	"testing"
)

// Missing skips t, saying why, or fails it under CI.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set, but %s", why)
	}
	t.Skip(why + ": skipping")
}

// Env returns the variable name, or is Missing when it is empty; why
// says what sets it.
func Env(t testing.TB, name, why string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		Missing(t, name+" is not set ("+why+")")
	}
	return v
}

// Binary returns the path of the command name, or is Missing without
// it; why says what installs it.
func Binary(t testing.TB, name, why string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" is not installed ("+why+")")
	}
	return path
}
