// Command protectctl lists, adds and lifts the bans of services protected
// by protect, in the Redis they share, with the settings they use.
//
//	protectctl [-redis URL] [-namespace NS] COMMAND [flags] [args]
//
// The store is -redis or HTTP_PROTECT_REDIS_URL; every other setting comes
// from the same HTTP_PROTECT_* environment the services read with
// protect.ConfigFromEnv, so addresses aggregate exactly as they count them.
// Data goes to stdout, messages to stderr. Exit status: 0 success, 1
// failure (the store is unreachable, say), 2 usage error.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
