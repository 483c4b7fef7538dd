// Command pathcount makes one allowed request on a warm Protector on the
// memory store, and nothing else, under coverage: built with
// -cover -covermode=atomic, it writes the counters of that one request
// (and of nothing before or after it) to the directory it is given, and
// `go tool covdata func` lists the functions it crossed.
// docs/performance.md gives the commands.
package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime/coverage"

	"github.com/httpprotect/protect"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: pathcount DIR (a binary built with -cover -covermode=atomic)")
		os.Exit(2)
	}
	dir := os.Args[1]
	p, err := protect.New(protect.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx := context.Background()
	a := netip.MustParseAddr("203.0.113.7")
	p.VerifyAddr(ctx, a) // the first request of a key inserts it
	if err := coverage.ClearCounters(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	d, _ := p.VerifyAddr(ctx, a)
	if err := coverage.WriteCountersDir(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := coverage.WriteMetaDir(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(d.Status)
	os.Exit(0) // nothing after the request is counted: no Close
}
