package bench

// The project on its memory store with a block list of 250,000 addresses
// and 100,000 ranges, none of which holds a benchmark key (10.0.0.0/8):
// what a large list costs the requests it does not refuse. The summary
// pairs it with project-mem, round by round.

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"

	protect "github.com/httpprotect/protect"
)

// writeBigList writes the list: n random IPv4 addresses and m random
// ranges (/16 to /28), outside 10.0.0.0/8. It returns the first address.
func writeBigList(path string, n, m int) (first netip.Addr, err error) {
	f, err := os.Create(path)
	if err != nil {
		return first, err
	}
	w := bufio.NewWriter(f)
	r := rand.New(rand.NewPCG(1, 2))
	addr := func() netip.Addr {
		for {
			a := netip.AddrFrom4([4]byte{byte(1 + r.UintN(222)), byte(r.UintN(256)), byte(r.UintN(256)), byte(r.UintN(256))})
			if a.As4()[0] != 10 {
				return a
			}
		}
	}
	for i := range n {
		a := addr()
		if i == 0 {
			first = a
		}
		fmt.Fprintln(w, a)
	}
	for range m {
		p, _ := addr().Prefix(16 + int(r.UintN(13)))
		fmt.Fprintln(w, p)
	}
	return first, errors.Join(w.Flush(), f.Close())
}

func newProjectLists(p Policy) (*projectAdapter, error) {
	dir, err := os.MkdirTemp("", "protect-bench-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "big.txt")
	first, err := writeBigList(path, 250_000, 100_000)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cfg := projectConfig(p)
	cfg.BlockLists = []protect.BlockList{{Name: "big", Path: path}}
	pr, err := protect.New(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if m := pr.BlockListMatches(first); len(m) != 1 {
		pr.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("project-mem-lists: BlockListMatches(%s) = %v, want the list", first, m)
	}
	return &projectAdapter{p: pr, done: func() error { return os.RemoveAll(dir) }}, nil
}

func init() {
	RegisterMemory(MemoryPeer{Name: "project-mem-lists", Rank: RankProject, Note: "protect, in-memory store, a 350k-entry block list that holds no key",
		New: func(p Policy) (Limiter, error) { return newProjectLists(p) }})
}
