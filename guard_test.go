package protect

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpprotect/protect/store"
)

// flakyStore is a store outside the process with none of the optional
// capabilities (remoteStore), whose Take fails while down is set: the
// guard, tested on the kind of store a third party writes.
type flakyStore struct {
	remoteStore
	down *atomic.Bool
	bans *atomic.Int64 // AddBan calls
}

type flakySpace struct {
	store.Space
	s flakyStore
}

func (s flakyStore) Space(sc store.Scope) (store.Space, error) {
	sp, err := s.remoteStore.Space(sc)
	if err != nil {
		return nil, err
	}
	return flakySpace{sp, s}, nil
}

var errDown = errors.New("store down")

func (sp flakySpace) Take(ctx context.Context, k Key, a netip.Addr, n int64) (store.Result, error) {
	if sp.s.down.Load() {
		return store.Result{}, errDown
	}
	return sp.Space.Take(ctx, k, a, n)
}

func (sp flakySpace) AddBan(ctx context.Context, b Ban, length time.Duration) (Ban, error) {
	sp.s.bans.Add(1)
	return sp.Space.AddBan(ctx, b, length)
}

func newFlaky(t *testing.T) (flakyStore, *Protector) {
	t.Helper()
	s := flakyStore{remoteStore{NewMemoryStore(MemoryOptions{})}, new(atomic.Bool), new(atomic.Int64)}
	t.Cleanup(func() { s.Close() })
	p, err := New(Config{Store: s, MaxRequests: 1, BanLimit: 1, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return s, p
}

// A ban the FailLocal store wrote while the store was down is written to
// the store once it answers, for the store's other instances to see; the
// store needs no capability for it.
func TestGuardReplaysLocalBans(t *testing.T) {
	s, p := newFlaky(t)
	s.down.Store(true)
	a := netip.MustParseAddr("192.0.2.9")
	for i := range 2 {
		d, _ := p.VerifyAddr(t.Context(), a)
		if want := []Status{Allowed, Banned}[i]; d.Status != want || !errors.Is(d.Err, errDown) {
			t.Fatalf("VerifyAddr(%v) #%d with the store down = %v, %v; want %v by FailLocal, Err %v", a, i+1, d.Status, d.Err, want, errDown)
		}
	}
	if n := p.Stats().PendingBans; n != 1 {
		t.Fatalf("Stats().PendingBans = %d, want 1", n)
	}
	s.down.Store(false)
	p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.10")) // the store answers: the replay starts
	p.Close()                                                    // and Close waits for it
	if n, got := s.bans.Load(), p.Stats().PendingBans; n != 1 || got != 0 {
		t.Fatalf("after the store came back: AddBan calls = %d, PendingBans = %d; want 1, 0", n, got)
	}
	sp, err := s.MemoryStore.Space(store.Scope{Namespace: DefaultNamespace, Limits: p.lim})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := sp.Inspect(t.Context(), Key{Prefix: netip.PrefixFrom(a, 32)}); err != nil || st.Ban == nil {
		t.Fatalf("store's Inspect(%v).Ban = %v, %v; want the replayed ban", a, st.Ban, err)
	}
}

// Nothing starts in the background once Close has returned: a request
// still in flight does not start a replay on a store its owner is about
// to close.
func TestGuardStartsNothingAfterClose(t *testing.T) {
	s, p := newFlaky(t)
	s.down.Store(true)
	a := netip.MustParseAddr("192.0.2.9")
	for range 2 {
		p.VerifyAddr(t.Context(), a)
	}
	s.down.Store(false)
	p.Close()
	p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.10")) // late: the store answers
	p.guard.bg.Wait()                                            // whatever the late request started
	if n := p.Stats().PendingBans; n != 1 {
		t.Fatalf("Stats().PendingBans after Close and a late request = %d, want 1 (no replay started)", n)
	}
	if n := s.bans.Load(); n != 0 {
		t.Fatalf("AddBan calls after Close = %d, want 0", n)
	}
}
