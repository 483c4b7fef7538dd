package follow

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/httpprotect/protect/admin"
)

// journal is a Source of events numbered from 1, appended by the test.
type journal struct {
	mu   sync.Mutex
	recs []admin.EventRecord
}

func (j *journal) add(n int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for range n {
		j.recs = append(j.recs, admin.EventRecord{Cursor: strconv.Itoa(len(j.recs) + 1), Kind: "ban"})
	}
}

func (j *journal) Events(_ context.Context, since string, limit int) ([]admin.EventRecord, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	after, _ := strconv.Atoi(since)
	out := j.recs[min(after, len(j.recs)):]
	return slices.Clone(out[:min(len(out), limit)]), nil
}

// A Queue holds what is written after it starts, not the history, and
// keeps the newest Queue events of a burst, counting the others.
func TestQueue(t *testing.T) {
	j := &journal{}
	j.add(3) // history
	q := New(Options{Name: "test", Queue: 4, Batch: 10, Poll: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	done, err := q.Start(ctx, j, func(context.Context) { close(started) })
	if err != nil {
		t.Fatal(err)
	}
	<-started
	j.add(6) // events 4 to 9: 4 and 5 are dropped once all are read
	for q.Dropped() < 2 {
		Wait(ctx, time.Millisecond)
	}
	got, ok := q.Next(ctx)
	var cursors []string
	for _, r := range got {
		cursors = append(cursors, r.Cursor)
	}
	if want := []string{"6", "7", "8", "9"}; !ok || !slices.Equal(cursors, want) || q.Dropped() != 2 {
		t.Fatalf("Next = %q, %v, Dropped %d; want %q, true, 2", cursors, ok, q.Dropped(), want)
	}
	cancel()
	<-done
	if _, ok := q.Next(ctx); ok {
		t.Fatal("Next after ctx ended = true, want false")
	}
}
