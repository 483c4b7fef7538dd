package main

import (
	"strings"
	"testing"
)

// -h and help print the manual, the package comment of doc.go, once, on
// stdout, and succeed.
func TestHelpPrintsManual(t *testing.T) {
	if !strings.HasPrefix(manual, "Protectctl lists, adds and lifts") || strings.Contains(manual, "\n//") {
		t.Fatalf("manual =\n%s\nwant doc.go's package comment without its // markers", manual)
	}
	for _, args := range [][]string{{"-h"}, {"-help"}, {"help"}, {"-redis", "redis://x", "-h"}} {
		var out, errs strings.Builder
		code := run(args, &out, &errs)
		if code != exitOK || out.String() != manual || errs.Len() != 0 {
			t.Errorf("protectctl %q: exit %d\nstdout %q\nstderr %q; want exit 0 and the manual on stdout", args, code, out.String(), errs.String())
		}
	}
}

// The manual names every command with the usage that "COMMAND -h" prints,
// so that the two cannot drift apart.
func TestManualListsCommands(t *testing.T) {
	for name, cmd := range commands {
		if !strings.Contains(manual, "\n\t"+cmd.usage+"\n") {
			t.Errorf("strings.Contains(manual, %q) = false, want true: doc.go must give the usage of %s", cmd.usage, name)
		}
	}
	for _, flag := range []string{"\t-redis URL\n", "\t-namespace NS\n"} {
		if !strings.Contains(manual, flag) {
			t.Errorf("strings.Contains(manual, %q) = false, want true: doc.go must list the global flag", flag)
		}
	}
}
