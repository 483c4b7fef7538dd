package protect

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A deadlineCtx is done within one slot after its deadline, reports the
// caller's cancellation at once, and shares its channel with every
// deadline of its slot.
func TestDeadlineContext(t *testing.T) {
	var w deadlines
	start := time.Now()
	d := start.Add(20 * time.Millisecond)
	ctx := w.context(context.Background(), d)
	if got, ok := ctx.Deadline(); !ok || !got.Equal(d) {
		t.Fatalf("Deadline() = %v, %v; want %v, true", got, ok, d)
	}
	if same := w.context(context.Background(), d.Add(time.Nanosecond)); same.Done() != ctx.Done() && d.UnixNano()%int64(deadlineSlot) != int64(deadlineSlot)-1 {
		t.Fatal("two deadlines a nanosecond apart got two channels")
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("Err() before the deadline = %v, want nil", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("Done() not closed a second after a 20ms deadline")
	}
	if late := time.Since(d); late < 0 || late > deadlineSlot+50*time.Millisecond {
		t.Fatalf("Done() closed %v after the deadline, want within [0, %v + scheduling]", late, deadlineSlot)
	}
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err() after Done = %v, want DeadlineExceeded", err)
	}

	parent, cancel := context.WithCancel(context.Background())
	ctx = w.context(parent, time.Now().Add(time.Hour))
	cancel()
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err() after the caller cancelled = %v, want Canceled", err)
	}

	early, cancelEarly := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancelEarly()
	if got := w.context(early, time.Now().Add(time.Hour)); got != early {
		t.Fatal("a parent with an earlier deadline was wrapped; want it returned as it is")
	}
}

// A Redis call waiting for a free pooled connection gives up at
// StoreTimeout, not at the client's PoolTimeout: go-redis waits on Done.
// The wait is the client's own, so miniredis shows it as well as a real
// server does.
func TestStoreTimeoutBoundsPoolWait(t *testing.T) {
	for _, target := range redisTargets[:2] { // one node: the pool is one client's
		t.Run(target.name, func(t *testing.T) {
			addr := target.addr(t)
			c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, PoolTimeout: 5 * time.Second, ContextTimeoutEnabled: true, MaxRetries: -1})
			t.Cleanup(func() { c.Close() })
			store := NewRedisStore(c, RedisOptions{RangeRefresh: -1, Logger: discardLogger()})
			t.Cleanup(func() { store.Close() })
			ns := testNamespace(t, addr)
			p, err := New(Config{Store: store, Namespace: ns, StoreTimeout: 100 * time.Millisecond, OnStoreError: FailOpen, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1")); d.Err != nil {
				t.Fatalf("VerifyAddr before the pool is taken: %v", d.Err)
			}
			busy := make(chan struct{})
			go func() { // the pool's only connection, busy for 2s
				defer close(busy)
				c.BLPop(context.Background(), 2*time.Second, ns+"never")
			}()
			time.Sleep(50 * time.Millisecond)
			start := time.Now()
			d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1"))
			if took := time.Since(start); d.Err == nil || took > 400*time.Millisecond {
				t.Fatalf("VerifyAddr with the pool taken: %v after %v; want a store error within StoreTimeout (100ms) plus slack", d.Err, took)
			}
			<-busy
		})
	}
}
