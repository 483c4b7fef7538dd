package protect

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/httpprotect/protect/memstore"
	"github.com/httpprotect/protect/store"
)

// failingAllowlist is a space whose Take fails, as a dead Redis's does,
// while its allowlist copy still answers Holds.
type failingAllowlist struct{ store.Allowlist }

func (failingAllowlist) Take(context.Context, store.Key, netip.Addr, int64) (store.Result, error) {
	return store.Result{}, errors.New("down")
}

type failingStore struct{ *memstore.Store }

func (s failingStore) Space(sc store.Scope) (store.Space, error) {
	sp, err := s.Store.Space(sc)
	if err != nil {
		return nil, err
	}
	return failingAllowlist{sp.(store.Allowlist)}, nil
}

// While the store fails, an allowed client is Safe, whatever the failure
// policy says of the others.
func TestAllowedWhileStoreDown(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { ms.Close() })
	p, err := New(Config{Store: failingStore{ms}, OnStoreError: FailClosed, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx := t.Context()
	a := netip.MustParseAddr("192.0.2.1")
	if _, err := p.Space().(store.Allowlist).Allow(ctx, store.Ban{Key: store.Key{Prefix: netip.PrefixFrom(a, 32)}}, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr string
		want Status
	}{{"192.0.2.1", Safe}, {"192.0.2.2", Unavailable}} {
		if d, _ := p.VerifyAddr(ctx, netip.MustParseAddr(tc.addr)); d.Status != tc.want {
			t.Errorf("VerifyAddr(%s) with the store down = %v, want %v", tc.addr, d.Status, tc.want)
		}
	}
}
