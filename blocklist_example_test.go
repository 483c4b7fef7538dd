package protect_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/httpprotect/protect"
)

// staticList is a live BlockSource of one set, as code of yours might
// keep one (a set it replaces whole, under an atomic pointer, when its
// source changes).
type staticList struct{ set *protect.BlockSet }

func (l staticList) BlockSet() *protect.BlockSet { return l.set }

// A block list refuses its addresses before anything is counted; a safe
// network inside a listed range still passes.
func ExampleBlockList() {
	set := protect.NewBlockSet([]protect.BlockEntry{
		{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Note: "scanner"},
	})
	p, err := protect.New(protect.Config{
		SafeNetworks: []string{"198.51.100.10"},
		BlockLists:   []protect.BlockList{{Name: "mine", Source: staticList{set}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	for _, a := range []string{"198.51.100.7", "198.51.100.10", "203.0.113.1"} {
		d, _ := p.VerifyAddr(context.Background(), netip.MustParseAddr(a))
		fmt.Println(a, d.Status, d.StatusCode())
	}
	m := p.BlockListMatches(netip.MustParseAddr("198.51.100.7"))
	fmt.Println(m[0].List, m[0].Entry, m[0].Note)
	// Output:
	// 198.51.100.7 blocked 403
	// 198.51.100.10 safe 200
	// 203.0.113.1 allowed 200
	// mine 198.51.100.0/24 scanner
}
