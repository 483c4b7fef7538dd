package storetest_test

import (
	"fmt"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/store"
)

// A store that is a Store and its spaces Spaces, and nothing more: run
// the suite on one made so, storetest.Run(t, func(t *testing.T)
// store.Store { return plain{newMyStore(t)} }), and a pass does not rest
// on an optional interface.
type plain struct{ store.Store }

func (p plain) Space(sc store.Scope) (store.Space, error) {
	sp, err := p.Store.Space(sc)
	if err != nil {
		return nil, err
	}
	return struct{ store.Space }{sp}, nil // hides LocalSpace, BanHolder, ...
}

// Example_hideCapabilities wraps the memory store so that the suite sees
// only the Store and Space contract.
func Example_hideCapabilities() {
	s := protect.NewMemoryStore(protect.MemoryOptions{})
	defer s.Close()
	sc := store.Scope{Namespace: "example:", Limits: store.Limits{TTL: time.Second, BanFactor: 1}}
	for _, st := range []store.Store{s, plain{s}} {
		sp, err := st.Space(sc)
		if err != nil {
			fmt.Println(err)
			return
		}
		_, local := sp.(store.LocalSpace)
		_, ranges := sp.(store.RangeBanCounter)
		fmt.Printf("%T: LocalSpace %v, RangeBanCounter %v\n", st, local, ranges)
	}
	// Output:
	// *memstore.Store: LocalSpace true, RangeBanCounter true
	// storetest_test.plain: LocalSpace false, RangeBanCounter false
}
