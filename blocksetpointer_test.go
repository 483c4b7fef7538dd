package protect

import (
	"net/netip"
	"sync/atomic"
	"testing"
)

// countingSource is a live source that counts the calls of BlockSet; with
// pointer set it also hands its set over (BlockSetPointer).
type countingSource struct {
	set   atomic.Pointer[BlockSet]
	calls atomic.Int64
}

func (s *countingSource) BlockSet() *BlockSet { s.calls.Add(1); return s.set.Load() }

type handingSource struct{ countingSource }

func (s *handingSource) BlockSetPointer() *atomic.Pointer[BlockSet] { return &s.set }

// A source that hands its set over is read without a call of BlockSet:
// requests load the set themselves, and see each set it stores. One
// that does not is asked on every request that reaches the step.
func TestBlockSetPointer(t *testing.T) {
	entries := make([]BlockEntry, 0, bigSet+1)
	for i := range bigSet {
		entries = append(entries, BlockEntry{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 15), byte(i >> 7), byte(i << 1)}), 32)})
	}
	entries = append(entries, BlockEntry{Prefix: netip.MustParsePrefix("203.0.113.0/24")})
	set := NewBlockSet(entries)
	handing, plain := &handingSource{}, &countingSource{}
	handing.set.Store(set)
	plain.set.Store(set)
	for _, tc := range []struct {
		name      string
		src       BlockSource
		calls     *atomic.Int64
		wantCalls int64 // for the four requests below
	}{
		{"BlockSetPointer", handing, &handing.calls, 0},
		{"BlockSource", plain, &plain.calls, 4},
	} {
		p, err := New(Config{Logger: discardLogger(), BlockLists: []BlockList{{Name: "big", Source: tc.src}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		tc.calls.Store(0)
		for addr, want := range map[string]Status{"192.0.2.1": Allowed, "203.0.113.9": Blocked, "100.0.1.6": Blocked, "100.0.1.7": Allowed} {
			if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr(addr)); d.Status != want {
				t.Errorf("%s: VerifyAddr(%s) = %v, want %v", tc.name, addr, d.Status, want)
			}
		}
		if got := tc.calls.Load(); got != tc.wantCalls {
			t.Errorf("%s: calls of BlockSet over 4 VerifyAddr = %d, want %d", tc.name, got, tc.wantCalls)
		}
	}
	// A set stored later is in force from the next request.
	handing.set.Store(NewBlockSet([]BlockEntry{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}}))
	p, err := New(Config{Logger: discardLogger(), BlockLists: []BlockList{{Name: "big", Source: handing}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	handing.set.Store(NewBlockSet(entries))
	if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("192.0.2.1")); d.Status != Allowed {
		t.Errorf("VerifyAddr(192.0.2.1) after the source stored a set without it = %v, want allowed", d.Status)
	}
	if d, _ := p.VerifyAddr(t.Context(), netip.MustParseAddr("203.0.113.1")); d.Status != Blocked {
		t.Errorf("VerifyAddr(203.0.113.1) after the source stored a set with it = %v, want blocked", d.Status)
	}
}

// bigSet is the size past which a BlockSet indexes the /24s of IPv4
// (blocklist's v4OccupancyMin): the sets of these tests take that path.
const bigSet = 1 << 17
