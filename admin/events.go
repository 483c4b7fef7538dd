package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/httpprotect/protect/store"
)

// EventRecord is one event of a ban list's journal (store.Journal) as
// protectctl and the admin API show it: what happened (Kind: ban, lift,
// expire, allow, disallow, allow-expire), when, and to which ban or
// allowlist entry.
type EventRecord struct {
	// Cursor is the event's place in its journal: pass it back as since
	// to read what came after.
	Cursor string    `json:"cursor"`
	Kind   string    `json:"kind"`
	Time   time.Time `json:"time"`
	// BanNamespace is the ban list whose journal holds the event.
	BanNamespace string     `json:"ban_namespace"`
	Key          string     `json:"key"`
	Range        bool       `json:"range"`
	Reason       string     `json:"reason"`
	Source       string     `json:"source"`
	By           string     `json:"by"`
	Expires      *time.Time `json:"expires"` // null: permanent
	Offense      int        `json:"offense"`
	// Malformed, when not empty, says that the journal holds an entry
	// here that the store cannot read, and what is wrong with it; the
	// other fields but Cursor are then what could be read.
	Malformed string `json:"malformed"`
}

// EventRecordOf converts a journal event of the ban list bns.
func EventRecordOf(e store.Event, bns string) EventRecord {
	b := e.Ban
	r := EventRecord{
		Cursor: e.Cursor, Kind: e.Kind.String(), Time: e.Time.UTC(), BanNamespace: bns,
		Range: b.Range, Reason: b.Reason, Source: string(b.Source), By: b.By,
		Offense: b.Offense, Malformed: b.Malformed,
	}
	if !b.Key.IsZero() {
		r.Key = b.Key.String()
	}
	if !b.Expires.IsZero() {
		exp := b.Expires.UTC()
		r.Expires = &exp
	}
	return r
}

// ErrNoJournal is returned for the events of a ban list whose store keeps
// no journal (its Space is no store.Journal).
var ErrNoJournal = errors.New("admin: the store keeps no journal of events")

// ErrCursorGone is wrapped by the error of Events for a cursor older than
// the oldest event the journal keeps: the events between were trimmed
// away. Read from the start (since "") to go on.
var ErrCursorGone = store.ErrCursorGone

// MaxEvents is the most events one call of Events returns, and the admin
// API's limit when none is asked for.
const MaxEvents = 10_000

// Events returns up to limit events of a's ban list written after the
// one at cursor since (since "": from the oldest kept), oldest first; a
// limit of 0 or above MaxEvents is MaxEvents. The call has StoreTimeout
// on a store outside this process.
func (a *Admin) Events(ctx context.Context, since string, limit int) ([]EventRecord, error) {
	j, ok := a.p.Space().(store.Journal)
	if !ok {
		return nil, ErrNoJournal
	}
	if limit <= 0 || limit > MaxEvents {
		limit = MaxEvents
	}
	ctx, cancel := a.deadline(ctx)
	defer cancel()
	evs, err := j.Events(ctx, since, limit)
	if err != nil {
		if errors.Is(err, store.ErrCursorGone) {
			return nil, fmt.Errorf("admin: events since %q: %w; read from the start (no since)", since, err)
		}
		return nil, fmt.Errorf("admin: events since %q: %w", since, err)
	}
	bns := a.p.Config().BanNamespace
	out := make([]EventRecord, 0, len(evs))
	for _, e := range evs {
		out = append(out, EventRecordOf(e, bns))
	}
	return out, nil
}

// Events returns the events of the service's ban list, as Admin.Events
// does. A service of several ban lists has a journal each, whose cursors
// do not compare: select one with Select first (else the error says so).
func (s *Service) Events(ctx context.Context, since string, limit int) ([]EventRecord, error) {
	lists := s.lists()
	switch len(lists) {
	case 0:
		return []EventRecord{}, nil
	case 1:
		return lists[0].Events(ctx, since, limit)
	}
	names := make([]string, len(lists))
	for i, a := range lists {
		names[i] = a.p.Config().BanNamespace
	}
	return nil, badf("events: the service has %d ban lists (%q), each with its journal: name one with namespace", len(lists), names)
}
