package protect

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/httpprotect/protect/internal/blocktest"
)

// staticSource is a BlockSource of one set; pointerSource is one that
// hands its set over, as a CrowdSec bouncer does.
type staticSource struct{ s *BlockSet }

func (s staticSource) BlockSet() *BlockSet { return s.s }

type pointerSource struct{ p atomic.Pointer[BlockSet] }

func (s *pointerSource) BlockSet() *BlockSet                        { return s.p.Load() }
func (s *pointerSource) BlockSetPointer() *atomic.Pointer[BlockSet] { return &s.p }

// BenchmarkVerifyAddrBlockLists measures the hot path of an unlisted
// address (10k keys, memory store) with no list and with 250k addresses
// and 100k ranges listed: what a list costs the requests it does not
// refuse.
func BenchmarkVerifyAddrBlockLists(b *testing.B) {
	ctx := context.Background()
	addrs := benchAddrs(10_000) // inside 11.0.0.0/16
	prefixes, _ := blocktest.Entries(250_000, 100_000)
	probe := netip.MustParsePrefix("11.0.0.0/16")
	var kept []BlockEntry
	for _, p := range prefixes {
		if !p.Overlaps(probe) {
			kept = append(kept, BlockEntry{Prefix: p})
		}
	}
	set := NewBlockSet(kept)
	ptr := &pointerSource{}
	ptr.p.Store(set)
	var file strings.Builder
	for _, e := range kept {
		file.WriteString(e.Prefix.String())
		file.WriteByte('\n')
	}
	path := filepath.Join(b.TempDir(), "big.txt")
	if err := os.WriteFile(path, []byte(file.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		lists []BlockList
	}{
		{"lists=0", nil},
		{"entries=350k/file", []BlockList{{Name: "big", Path: path}}},
		{"entries=350k/source", []BlockList{{Name: "big", Source: ptr}}},
		{"entries=350k/source-call", []BlockList{{Name: "big", Source: staticSource{set}}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := New(Config{MaxRequests: 1 << 62, BanLimit: -1, Logger: discardLogger(), BlockLists: bc.lists})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { p.Close() })
			for _, a := range addrs {
				p.VerifyAddr(ctx, a)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if d, _ := p.VerifyAddr(ctx, addrs[i]); d.Status != Allowed {
					b.Fatalf("VerifyAddr(%s) = %v, want allowed", addrs[i], d.Status)
				}
				if i++; i == len(addrs) {
					i = 0
				}
			}
		})
	}
}
