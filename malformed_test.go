package protect

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/httpprotect/protect/store"
)

// damagedStore is a third party's store whose record of one key is
// damaged: its Take decides as if the record were absent and reports the
// damage beside the result, as the SPI asks (malformed.go).
type damagedStore struct{ remoteStore }

func (s damagedStore) Space(sc store.Scope) (store.Space, error) {
	sp, err := s.remoteStore.Space(sc)
	if err != nil {
		return nil, err
	}
	return damagedSpace{sp}, nil
}

type damagedSpace struct{ store.Space }

func (sp damagedSpace) Take(ctx context.Context, k Key, a netip.Addr, n int64) (store.Result, error) {
	res, err := sp.Space.Take(ctx, k, a, n)
	if err == nil && k.Name == "damaged" {
		err = &store.MalformedError{Key: "db:bans/damaged", Record: `"garbage"`, Err: errors.New("not a ban")}
	}
	return res, err
}

// The guard uses the result of a Take that reports a malformed record,
// never counts it toward the breaker nor as a store error, counts it in
// Stats.Malformed and logs the record once.
func TestMalformedIsNotAFailure(t *testing.T) {
	var logs bytes.Buffer
	p, err := New(Config{Store: damagedStore{remoteStore{NewMemoryStore(MemoryOptions{})}}, OnStoreError: FailClosed, MaxRequests: 100,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := 1; i <= 10; i++ {
		d, err := p.VerifyKey(t.Context(), "damaged")
		if err != nil || d.Status != Allowed || d.Count != int64(i) || d.Err != nil {
			t.Fatalf("VerifyKey(damaged) #%d = %v, count %d, Err %v, %v; want Allowed, count %d", i, d.Status, d.Count, d.Err, err, i)
		}
	}
	st := p.Stats()
	if st.Malformed != 10 || st.StoreErrors != 0 || st.CircuitOpens != 0 || st.StoreFailures != 0 || st.CircuitOpen {
		t.Fatalf("Stats: malformed %d, errors %d, opens %d, failures %d; want 10, 0, 0, 0", st.Malformed, st.StoreErrors, st.CircuitOpens, st.StoreFailures)
	}
	if n := strings.Count(logs.String(), "msg=\"protect: malformed record in the store"); n != 1 || !strings.Contains(logs.String(), "key=db:bans/damaged") {
		t.Fatalf("log:\n%s\nwant one line naming the record's key", logs.String())
	}
	if !errors.Is(&store.MalformedError{}, ErrMalformed) {
		t.Fatal("errors.Is(&MalformedError{}, ErrMalformed) = false")
	}
}
