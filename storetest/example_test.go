package storetest_test

import (
	"fmt"
	"time"

	"github.com/httpprotect/protect"
)

// A store that is a Store and its spaces Spaces, and nothing more: run
// the suite on one made so, storetest.Run(t, func(t *testing.T)
// protect.Store { return plain{newMyStore(t)} }), and a pass does not rest
// on an optional interface.
type plain struct{ protect.Store }

func (p plain) Space(sc protect.Scope) (protect.Space, error) {
	sp, err := p.Store.Space(sc)
	if err != nil {
		return nil, err
	}
	return struct{ protect.Space }{sp}, nil // hides LocalSpace, BanHolder, ...
}

// Example_hideCapabilities wraps the memory store so that the suite sees
// only the Store and Space contract.
func Example_hideCapabilities() {
	s := protect.NewMemoryStore(protect.MemoryOptions{})
	defer s.Close()
	sc := protect.Scope{Namespace: "example:", Limits: protect.Limits{TTL: time.Second, BanFactor: 1}}
	for _, st := range []protect.Store{s, plain{s}} {
		sp, err := st.Space(sc)
		if err != nil {
			fmt.Println(err)
			return
		}
		_, local := sp.(protect.LocalSpace)
		_, ranges := sp.(protect.RangeBanCounter)
		fmt.Printf("%T: LocalSpace %v, RangeBanCounter %v\n", st, local, ranges)
	}
	// Output:
	// *protect.MemoryStore: LocalSpace true, RangeBanCounter true
	// storetest_test.plain: LocalSpace false, RangeBanCounter false
}
