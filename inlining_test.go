package protect

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The functions of the hot paths that the compiler must inline, by
// package: a change that pushes one past the inliner's budget turns a
// step of every request into a call, which shows here rather than as a
// slower benchmark.
var mustInline = map[string][]string{
	".": {
		"(*Protector).screened",
		"(*Protector).VerifyConsumer",
		"(*Protector).VerifyConsumerN",
		"Decision.Refused",
		"Decision.StatusCode",
	},
	"./store": {
		"(*Result).Banned",
		"(*Plan).Len",
		"(*Plan).Spec",
		"(*LimitState).Refused",
		"(*PlanResult).Refused",
	},
	"./memstore": {
		"(*coarseClock).now",
		"satAdd",
		"(*counterTable[github.com/httpprotect/protect/memstore.addrKey]).promotes",
		"(*table[github.com/httpprotect/protect/memstore.addrKey]).take",
		"(*counterTable[github.com/httpprotect/protect/memstore.addrKey]).find",
	},
	"./internal/clientaddr": {
		"NetList.Empty",
	},
}

func TestInlining(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the packages with -gcflags=-m")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("go tool: %v", err)
		}
		t.Skipf("no go tool at %s", goBin)
	}
	for pkg, fns := range mustInline {
		out, err := exec.Command(goBin, "build", "-gcflags=-m", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go build -gcflags=-m %s: %v\n%s", pkg, err, out)
		}
		can := map[string]bool{}
		for _, line := range strings.Split(string(out), "\n") {
			if _, fn, ok := strings.Cut(line, ": can inline "); ok {
				can[fn] = true
			}
		}
		for _, fn := range fns {
			if !can[fn] {
				t.Errorf("%s: %s is not inlinable, want it inlined", pkg, fn)
			}
		}
	}
}
