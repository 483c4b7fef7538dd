// Package blocklist holds the block lists a Protector is fed: networks
// that are refused (Blocked, 403) before the store is asked anything.
// A List names a file, a URL or a live Source; Open checks and loads the
// lists and keeps them fresh (files by modification, URLs by conditional
// GET), and a Set is one list's networks, indexed so that a request costs
// a load and a search. A load that would shrink a list below MinShare of
// the set in force, or cover half of an address family, is refused: the
// last good set stays.
//
// Formats: plain (an address or CIDR a line), FireHOL netset, Spamhaus
// DROP (text and JSON) and IPsum. Package crowdsec is a live Source.
package blocklist
