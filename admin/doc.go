// Package admin administers the bans of a protect.Protector: list and
// filter them, add and lift them, inspect one target, and explain how a
// request would be decided without counting it. protectctl is built on
// it; a service can call it from its own code, behind its own
// authentication. It serves no HTTP of its own.
//
// An Admin aggregates and trusts exactly as the protector it is given, so
// build that protector from the service's own Config (in code, or read by
// package envconfig from the service's environment), on the store the
// service uses: then lifting 2001:db8:1:2::99 lifts 2001:db8:1:2::/64, as
// the service counts it. ServiceConfig fills in the limits the service
// published in that store, so that Inspect and Explain show the numbers
// the service enforces.
//
// The records here (BanRecord, Inspection, Explanation) are protectctl's
// stable -json schema: fields are only ever added.
package admin
