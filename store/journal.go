package store

import (
	"context"
	"errors"
	"time"
)

// An EventKind says what an Event records. The zero EventKind is no
// event; a store never journals it.
type EventKind uint8

const (
	// EventBan is a ban written, by the pipeline (Source auto) or by an
	// operator (manual), replacing any ban on the same key.
	EventBan EventKind = iota + 1
	// EventLift is a ban removed before its end.
	EventLift
	// EventExpire is a ban that reached its end. A store journals it when
	// it notices: when the ban is next looked at, or by a sweep, never
	// before Expires.
	EventExpire
	// EventAllow is an entry added to the allowlist.
	EventAllow
	// EventDisallow is an allowlist entry removed before its end.
	EventDisallow
	// EventAllowExpire is an allowlist entry that reached its end. A
	// store journals it when it notices, as EventExpire: by a sweep, or
	// when the allowlist is next listed, never before Expires.
	EventAllowExpire
)

var eventKindNames = [...]string{"", "ban", "lift", "expire", "allow", "disallow", "allow-expire"}

// String returns the kind's name as the admin API writes it: "ban",
// "lift", "expire", "allow", "disallow" or "allow-expire"; "" for the
// zero EventKind and
// for kinds this package does not know.
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return ""
}

// ParseEventKind returns the kind named s, as String writes it.
func ParseEventKind(s string) (EventKind, bool) {
	for k, name := range eventKindNames {
		if k > 0 && name == s {
			return EventKind(k), true
		}
	}
	return 0, false
}

// An Event is one entry of a space's journal: what happened to a ban or
// an allowlist entry. The zero Event records nothing.
type Event struct {
	// Cursor is the event's place in the journal, as the store writes it:
	// opaque, and passed back to Journal.Events to read what came after.
	Cursor string
	Kind   EventKind
	// Time is when the store wrote the event, by its clock.
	Time time.Time
	// Ban is the ban (for EventBan, EventLift and EventExpire) or the
	// allowlist entry (EventAllow, EventDisallow; Source is empty and
	// Offense zero) the event is about, as it was stored. For a lift, By
	// is who lifted it, when that is known.
	Ban Ban
}

// ErrCursorGone is returned by Journal.Events for a cursor older than the
// oldest event the journal keeps: the events between were trimmed away,
// so a reader that must miss nothing (a bouncer's feed) starts again from
// the whole state.
var ErrCursorGone = errors.New("store: journal: cursor trimmed away")

// ErrBadCursor is wrapped by the error of Journal.Events for a cursor the
// journal never wrote: one that does not parse as its cursors do, or one
// past its newest event.
var ErrBadCursor = errors.New("store: journal: not a cursor of this journal")

// A Journal is a Space that keeps an ordered log of what happened to its
// bans and allowlist entries. A store that offers it journals every ban,
// lift and expiry of the space (and every allow and disallow, when it
// keeps an allowlist) in the same atomic step as the change itself, so
// that no change is ever without its event, and trims the log by age and
// length, as its documentation says.
type Journal interface {
	Space
	// Events returns up to limit events written after the one at cursor
	// since, oldest first; since "" reads from the oldest kept. An empty
	// result is the end of the journal for now; ask again with the last
	// event's cursor. A since older than the oldest event kept is
	// ErrCursorGone, and one this journal never wrote wraps ErrBadCursor.
	Events(ctx context.Context, since string, limit int) ([]Event, error)
}

// A Bookmarks is a Journal that keeps, for its readers, small texts by
// name: where each reader stands in the journal, so that any process on
// the same store can go on where another left off (protectd keeps each
// CrowdSec bouncer's place in its feed so). A bookmark is written whole
// and read whole; it ends by itself after its ttl, as a reader that
// stopped reading should not hold anything for ever.
type Bookmarks interface {
	Journal
	// Bookmark returns the text saved under name, and false when there
	// is none (never saved, or past its ttl).
	Bookmark(ctx context.Context, name string) (text string, ok bool, err error)
	// SetBookmark saves text under name for ttl (at least a second),
	// replacing what was saved there.
	SetBookmark(ctx context.Context, name, text string, ttl time.Duration) error
	// SwapBookmark saves text under name for ttl, as SetBookmark does,
	// only if name holds old (a name with nothing saved, or past its
	// ttl, holds ""), and reports whether it did: one atomic step, so
	// that a reader putting back what it saved never overwrites what
	// another reader saved since.
	SwapBookmark(ctx context.Context, name, old, text string, ttl time.Duration) (swapped bool, err error)
}
