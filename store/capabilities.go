package store

import (
	"context"
	"net/netip"
	"time"
)

// What a store may offer beyond Store and Space. The Protector finds each
// capability by a type assertion on the Store or on the Space it bound, as
// io/fs finds ReadDirFS on an FS: a store that has none of them still gets
// exact counts, bans, plans and the failure policy; one that has them gets
// what they say. The shipped stores use these and nothing else, so a
// third party's store can do all that they do.

// A LocalSpace is a Space that answers from this process's memory. When
// Local reports true the Protector calls it directly: it cannot hang or
// fail as a network does, so its calls get no deadline and no circuit
// breaker, no FailLocal store is kept beside it, and its limits are
// published at once. (An error it returns all the same, which only a bad
// argument can cause, is answered by OnStoreError as any store error
// is.) Every other Space is called through the guard (StoreTimeout, the
// circuit breaker, OnStoreError).
type LocalSpace interface {
	Space
	Local() bool
}

// A DeadlineSpace is a Space whose calls use nothing of a context but its
// deadline, its Done channel and its Err (no values, no cancellation
// before the deadline is needed to end a call). When DeadlineOnly reports
// true the Protector passes it a context that costs a fraction of
// context.WithTimeout: its Done channel is shared by every call whose
// deadline falls within a few milliseconds, closes at most that long
// after the deadline, and does not close when the caller gives up (Err
// reports that at once). go-redis, with ContextTimeoutEnabled, is such a
// user of contexts.
type DeadlineSpace interface {
	Space
	DeadlineOnly() bool
}

// A BanHolder is a Space that holds bans in this process: a copy of its
// range bans, a cache of the key bans it has seen. HeldBan answers, with
// no I/O, whether such a ban refuses a request of key k from address addr
// (the zero Addr when there is none), as Take would.
//
// The Protector asks it while the store cannot be asked (its circuit is
// open, or a call failed), under every failure policy: what the store
// last said is the best answer there is. A held key ban should therefore
// hold past the age at which it would be asked again, until the ban's own
// end.
type BanHolder interface {
	Space
	HeldBan(k Key, addr netip.Addr) (Result, bool)
}

// A BanPager is a Space that lists and lifts bans a page at a time, each
// page under its own deadline of perPage (0: ctx's alone), because a ban
// list may hold more bans than one StoreTimeout can cover. The Protector
// uses it for the lifts of a CIDR, package admin for listing bans
// (ListBans); ctx bounds the whole.
type BanPager interface {
	Space
	// BansPaged lists as Space.Bans does.
	BansPaged(ctx context.Context, f BanFilter, perPage time.Duration) ([]Ban, error)
	// LiftBans lifts the bans on keys, which are not ranges, and returns
	// those it removed.
	LiftBans(ctx context.Context, keys []Key, perPage time.Duration) ([]Ban, error)
}

// ListBans lists the bans of sp that f selects, sorted as SortBans
// sorts them: a page at a time, each page within perPage, when sp is a
// BanPager; in one call of Space.Bans otherwise. An empty list is empty,
// never nil.
func ListBans(ctx context.Context, sp Space, f BanFilter, perPage time.Duration) ([]Ban, error) {
	var (
		bans []Ban
		err  error
	)
	if ps, ok := sp.(BanPager); ok {
		bans, err = ps.BansPaged(ctx, f, perPage)
	} else {
		bans, err = sp.Bans(ctx, f)
	}
	if err != nil {
		return nil, err
	}
	if bans == nil {
		bans = []Ban{}
	}
	SortBans(bans)
	return bans, nil
}

// A RangeBanCounter is a Space that can tell, without I/O, how many range
// bans are in force in its ban list, from the copy it checks requests
// against; Stats.RangeBans reports it, and -1 for a Space that cannot.
type RangeBanCounter interface {
	Space
	RangeBans() int
}

// A CircuitStore is a Store that keeps one circuit breaker for every
// protector built on it, so that a store that is down costs a few
// timeouts in all rather than that many per protector. Circuit returns
// the same Circuit on every call (the zero Circuit will do: keep one in
// the store's struct). A Store that is not one gets a breaker per
// protector.
type CircuitStore interface {
	Store
	Circuit() *Circuit
}

// A SetupChecker is a Store that can tell what in the setup of the server
// behind it puts protect's state at risk: an eviction policy that may
// delete bans, no persistence, so that a restart forgets them. protectd
// calls it at start and in -check and logs each warning; a store that is
// not one is not checked.
//
// CheckSetup returns one SetupWarning for each risk it finds, none when
// it finds none, and an error when it cannot check (a managed server may
// refuse the commands that read its settings): that says nothing about
// the setup, and is for the log at info level, never a reason to stop.
type SetupChecker interface {
	Store
	CheckSetup(ctx context.Context) ([]SetupWarning, error)
}

// A SetupWarning is one risk a SetupChecker found. The zero value is no
// warning.
type SetupWarning struct {
	Setting string // the server setting at fault: "maxmemory-policy"
	Value   string // its value: "allkeys-lru"
	Server  string // the server that has it, for a store of several
	Risk    string // what is lost, in words
	Fix     string // how to put it right
}

// String says the warning in one line.
func (w SetupWarning) String() string {
	s := w.Setting + " " + w.Value
	if w.Server != "" {
		s += " on " + w.Server
	}
	return s + ": " + w.Risk + "; " + w.Fix
}
