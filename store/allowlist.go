package store

import (
	"context"
	"errors"
	"net/netip"
	"time"
)

// An Allowlist is a Space that keeps an allowlist beside its bans: keys
// and ranges of addresses that are never counted and never banned while
// their entry lasts. Take and TakePlan answer a key on it, or an address
// inside a range on it, with Result.Allowed before anything else, in the
// same step: so an entry holds on every instance that shares the store,
// as soon as the store's copy holds it (on Redis, within RangeRefresh).
// An entry is a Ban value (Key, Range, Reason, By, Created, Expires;
// Source is empty and Offense zero), and expires by itself. A store that also keeps a Journal journals
// EventAllow and EventDisallow.
//
// An entry lifts nothing itself: the caller lifts the bans it covers
// after adding it (admin.Admin.Allow does), so that no ban is written
// between the lift and the entry.
type Allowlist interface {
	Space
	// Allow adds, or replaces, the entry on e.Key for length (0: until
	// disallowed) and returns it as stored. A key that is not an address
	// key or range is ErrNotAllowable.
	Allow(ctx context.Context, e Ban, length time.Duration) (Ban, error)
	// Disallow removes the entry on exactly k, reporting whether one was
	// in force.
	Disallow(ctx context.Context, k Key) (Ban, bool, error)
	// Allows lists the entries in force, in no set order.
	Allows(ctx context.Context) ([]Ban, error)
	// Holds reports whether an entry holds addr as this process knows the
	// allowlist, without a round trip: the memory store's own, the Redis
	// store's copy. The pipeline asks it before the block lists, so that
	// an allowed address is Safe there too (step 2); Take's answer stays
	// the one that counts for the store's own steps.
	Holds(addr netip.Addr) bool
}

// ErrNotAllowable is returned by Allowlist.Allow for a key that names no
// address or range: a consumer is let through by its plan, not by an
// allowlist.
var ErrNotAllowable = errors.New("store: only an address key or a range can be allowed")

// ErrAllowed is returned by Space.AddBan for a key or range that an
// allowlist entry covers: a ban there would never be enforced.
var ErrAllowed = errors.New("store: the allowlist covers it")
