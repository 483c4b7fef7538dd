// Package memstore is the memory store of protect: the store a Protector
// makes when its Config names none, for a service on one node. It is
// sharded, safe for concurrent use and bounded (a cap on counters; under
// pressure counters go first, bans never), and sweeps expired entries
// without blocking requests.
//
// New makes a store that keeps everything in memory. Open makes one whose
// bans, lifts, offense histories, plan states, journals and bookmarks
// survive restarts in a state file (bbolt), written behind the requests
// and checked when opened: damage is moved aside and the rest restored.
//
// Each ban namespace keeps a journal (store.Journal, Space.Events) of
// every ban written (by an operator, or by the pipeline past BanLimit),
// lifted and over, and of every allowlist entry added or removed: an
// event each, appended under the lock of the change itself, with a
// cursor that is its sequence number in the namespace, in decimal,
// counted from the store's start in Unix nanoseconds. A ban over is
// journaled when the store notices it (its sweep, or a request or lift
// that finds it over), once, never before its end. The journal is a ring
// bounded by Options.JournalLength and Options.JournalAge; a request that
// writes no ban does no journal work. Its readers' bookmarks
// (store.Bookmarks) are kept beside it.
//
// Without a state file the journal and the bookmarks are in memory only:
// a restart starts every journal again, past every cursor of the run
// before, which then reads as trimmed away (store.ErrCursorGone), and
// forgets every bookmark. With a state file both are written there with
// the changes they record and restored at open, bounded on disk as in
// memory: a cursor or a bookmark from before a restart reads on after it,
// the events after it there in order and numbered as they were, and the
// new run numbers its events past them. A bookmark keeps its expiry. What
// a kill -9 loses is what a ban loses (see Open): the events and
// bookmarks of the last moments, not yet written; a cursor naming an
// event so lost reads as store.ErrCursorGone, never as another event.
//
// The package imports nothing of protect but package store: it is a peer
// of redisstore, and a model for a store written elsewhere.
package memstore
