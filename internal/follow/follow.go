// Package follow reads a ban list's journal (admin.Events) into a bounded
// queue, for the sinks that hand its events on: the webhook and
// crowdsec.Machine. A Queue follows the journal from its end, as it reads
// it when it starts, and while its consumer is slow or its receiver down
// it drops the oldest events beyond its bound and counts them, so that
// nothing a request does ever waits for a receiver.
package follow

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpprotect/protect/admin"
)

// Source is where a Queue reads events: an admin.Admin or admin.Service.
type Source interface {
	Events(ctx context.Context, since string, limit int) ([]admin.EventRecord, error)
}

// Options configure a Queue; New fills in the zero fields.
type Options struct {
	Name  string // what the log lines are about: "webhook", say
	Queue int    // events read but not yet taken [10,000]
	Batch int    // the most events Next returns [100]
	// Poll is how often the journal is read while nothing is new [1s].
	Poll   time.Duration
	Logger *slog.Logger // [nothing logged]
	// Wait waits d or until ctx is done, reporting whether d passed
	// [Wait]. Tests pass one that does not sleep.
	Wait func(ctx context.Context, d time.Duration) bool
}

// A Queue holds a journal's events between its reader and its consumer.
// Make one with New.
type Queue struct {
	o     Options
	mu    sync.Mutex
	queue []admin.EventRecord
	ready chan struct{} // signalled when queue gains events

	dropped, lost atomic.Uint64
}

// New returns a Queue of o, its defaults filled in.
func New(o Options) *Queue {
	if o.Queue <= 0 {
		o.Queue = 10_000
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Wait == nil {
		o.Wait = Wait
	}
	return &Queue{o: o, ready: make(chan struct{}, 1)}
}

// Wait waits d or until ctx is done, reporting whether d passed.
func Wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Dropped counts the events dropped from a full queue, never taken.
func (q *Queue) Dropped() uint64 { return q.dropped.Load() }

// Lost counts the journal reads that found their cursor trimmed away.
func (q *Queue) Lost() uint64 { return q.lost.Load() }

// Start reads src's journal to its end before it returns, then follows
// it into the queue and runs consume beside, until ctx is done; done is
// closed once both have returned. A source without a journal is
// admin.ErrNoJournal, and nothing is started; another error of that
// first read is logged and the read tried again every Poll.
func (q *Queue) Start(ctx context.Context, src Source, consume func(context.Context)) (done <-chan struct{}, err error) {
	cursor, rerr := end(ctx, src)
	if errors.Is(rerr, admin.ErrNoJournal) {
		return nil, rerr
	}
	if rerr != nil && ctx.Err() == nil {
		q.o.Logger.Warn(q.o.Name+": reading the journal failed", "err", rerr.Error())
	}
	c := make(chan struct{})
	go func() {
		defer close(c)
		for err := rerr; err != nil; {
			if !q.o.Wait(ctx, q.o.Poll) {
				return
			}
			if cursor, err = end(ctx, src); err != nil && ctx.Err() == nil {
				q.o.Logger.Warn(q.o.Name+": reading the journal failed", "err", err.Error())
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() { consume(ctx) })
		q.read(ctx, src, cursor)
		wg.Wait()
	}()
	return c, nil
}

// end is the cursor of src's newest event ("" for none), so that a Queue
// holds what happens from now on, not the journal's history.
func end(ctx context.Context, src Source) (string, error) {
	cursor := ""
	for {
		recs, err := src.Events(ctx, cursor, admin.MaxEvents)
		if err != nil || len(recs) == 0 {
			return cursor, err
		}
		cursor = recs[len(recs)-1].Cursor
	}
}

// read moves src's events after cursor into the queue until ctx is done.
func (q *Queue) read(ctx context.Context, src Source, cursor string) {
	for {
		recs, err := src.Events(ctx, cursor, q.o.Batch*10)
		switch {
		case errors.Is(err, admin.ErrCursorGone):
			// The journal trimmed events before they were read: go on
			// from its start, which holds the newest it kept.
			q.lost.Add(1)
			q.o.Logger.Warn(q.o.Name+": the journal trimmed events before they were read", "cursor", cursor)
			cursor = ""
			continue
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			q.o.Logger.Warn(q.o.Name+": reading the journal failed", "err", err.Error())
		case len(recs) > 0:
			cursor = recs[len(recs)-1].Cursor
			q.add(recs)
			continue
		}
		if !q.o.Wait(ctx, q.o.Poll) {
			return
		}
	}
}

// add appends recs, dropping the oldest beyond the bound.
func (q *Queue) add(recs []admin.EventRecord) {
	q.mu.Lock()
	q.queue = append(q.queue, recs...)
	if over := len(q.queue) - q.o.Queue; over > 0 {
		q.queue = append(q.queue[:0], q.queue[over:]...)
		q.dropped.Add(uint64(over))
		q.o.Logger.Warn(q.o.Name+": queue full, oldest events dropped", "dropped", over, "queue", q.o.Queue)
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Next removes and returns up to Batch events, oldest first, waiting for
// one; false once ctx is done.
func (q *Queue) Next(ctx context.Context) ([]admin.EventRecord, bool) {
	for {
		q.mu.Lock()
		n := min(len(q.queue), q.o.Batch)
		if n > 0 {
			batch := append([]admin.EventRecord(nil), q.queue[:n]...)
			q.queue = append(q.queue[:0], q.queue[n:]...)
			q.mu.Unlock()
			return batch, true
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, false
		case <-q.ready:
		}
	}
}
