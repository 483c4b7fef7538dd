package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// -h prints the manual, the package comment of doc.go, once, on stdout,
// and exits 0.
func TestHelpPrintsManual(t *testing.T) {
	if !strings.HasPrefix(manual, "Protectd is protect as a decision service") || strings.Contains(manual, "\n//") {
		t.Fatalf("manual =\n%s\nwant doc.go's package comment without its // markers", manual)
	}
	for _, args := range [][]string{{"-h"}, {"-help"}, {"-check", "-h"}} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, nil, &stdout, &stderr)
		if code != exitOK || stdout.String() != manual || stderr.Len() != 0 {
			t.Errorf("protectd %q: exit %d\nstdout %q\nstderr %q; want exit 0 and the manual on stdout", args, code, stdout.String(), stderr.String())
		}
	}
	// A mistake prints the short usage once, on stderr, and exits 2.
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-nope"}, nil, &stdout, &stderr); code != exitUsage || stdout.Len() != 0 ||
		strings.Count(stderr.String(), "usage: protectd") != 1 || strings.Contains(stderr.String(), "Protectd is") {
		t.Errorf("protectd -nope = exit %d\nstdout %q\nstderr %q\nwant exit 2 and the short usage once, on stderr", code, stdout.String(), stderr.String())
	}
}

// The manual names each of protectd's own settings.
func TestManualListsSettings(t *testing.T) {
	for _, name := range []string{envListen, envPlans, "-check", envCrowdsecMachineID, envCrowdsecPassword} {
		if !strings.Contains(manual, name) {
			t.Errorf("strings.Contains(manual, %q) = false, want true: doc.go must mention it", name)
		}
	}
}
