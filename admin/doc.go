// Package admin administers the bans of a protect.Protector: list and
// filter them, add and lift them, inspect one target, explain how a
// request would be decided without counting it, and check what would
// refuse an address. protectctl is built on it; a service can call it
// from its own code, or mount Handler, its HTTP API, behind its own
// authentication (Handler has none: see its doc). Dashboard serves the
// same API behind an admin token, with a web dashboard at / (its
// decisions per second, bans, allowlist, block lists and journal), fed
// the keys refused most by a Refused.
//
// An Admin administers one protector. A Service administers every
// protector of one service as one system (its ban lists, and each
// protector's counters and limits): Handler serves a Service, and
// protectctl runs its commands on one, on Redis or through Handler, so
// that both give the same records.
//
// An Admin aggregates and trusts exactly as the protector it is given, so
// build that protector from the service's own Config (in code, or read by
// package envconfig from the service's environment), on the store the
// service uses: then lifting 2001:db8:1:2::99 lifts 2001:db8:1:2::/64, as
// the service counts it. ServiceConfig fills in the limits the service
// published in that store, so that Inspect and Explain show the numbers
// the service enforces.
//
// The records here (BanRecord, Inspection, Explanation, CheckReport,
// ProtectorRecord, LimitRecord) are protectctl's stable -json schema and
// the admin API's: fields are only ever added.
package admin
