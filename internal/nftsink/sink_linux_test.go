//go:build linux

package nftsink

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/needs"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/netnstest"
	"github.com/httpprotect/protect/internal/testclock"
)

// dialTimeout is long for a veth pair and short for a test: a dropped
// SYN makes the dial wait all of it.
const dialTimeout = 300 * time.Millisecond

// rig is a client and a server namespace, the server's ruleset from
// testdata/protect.nft, a TCP server there and a protector whose bans a
// sink writes into the server's sets.
type rig struct {
	*netnstest.Pair
	p           *protect.Protector
	sink        *Sink
	fd          int
	addr, addr6 string // the TCP server, on IPv4 and IPv6
}

func newRig(t *testing.T) *rig {
	t.Helper()
	pair := netnstest.New(t)
	needs.Binary(t, "nft", "nftables; .ci/parts/50-nftables.sh installs it")
	if _, err := pair.Exec(pair.Server, "nft", "-f", "testdata/protect.nft"); err != nil {
		t.Fatal(err)
	}
	r := &rig{Pair: pair, fd: pair.Fd(pair.Server)}
	r.addr = pair.Serve(pair.Server, pair.ServerAddr.String()+":0")
	r.addr6 = pair.Serve(pair.Server, "["+pair.ServerAddr6.String()+"]:0")
	p, err := protect.New(protect.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	r.p = p
	r.sink = r.open(t)
	return r
}

func (r *rig) open(t *testing.T) *Sink {
	t.Helper()
	s, err := Open(Options{NetNS: r.fd})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sync writes the protector's bans into the kernel with sink s.
func (r *rig) sync(t *testing.T, s *Sink) Result {
	t.Helper()
	bans, err := admin.New(r.p).Bans(context.Background(), admin.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Sync(context.Background(), bans)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return res
}

// reaches reports whether the client connects to the server over IPv4.
func (r *rig) reaches(t *testing.T) bool {
	t.Helper()
	return r.reachesAt(t, r.addr)
}

// reachesAt reports whether the client connects to the server at addr.
func (r *rig) reachesAt(t *testing.T, addr string) bool {
	t.Helper()
	return r.Reaches(addr, dialTimeout)
}

func (r *rig) ban(t *testing.T, target string, opt protect.BanOptions) protect.Ban {
	t.Helper()
	b, err := r.p.Ban(context.Background(), target, opt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (r *rig) lift(t *testing.T, target string) {
	t.Helper()
	if _, err := r.p.Lift(context.Background(), target, "test"); err != nil {
		t.Fatal(err)
	}
}

// nftElem is an element of nft -j list set: a bare address, or an
// object with a prefix or a range and the timeout and time left in
// seconds.
type nftElem struct {
	Addr    string
	Prefix  string
	Timeout int64
	Expires int64
}

// listSet reads set name of table inet protect with nft -j, in the
// server's namespace.
func (r *rig) listSet(t *testing.T, name string) []nftElem {
	t.Helper()
	out, err := r.Exec(r.Server, "nft", "-j", "list", "set", "inet", "protect", name)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Nftables []struct {
			Set *struct {
				Elem []json.RawMessage `json:"elem"`
			} `json:"set"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("nft -j: %v: %s", err, out)
	}
	var els []nftElem
	for _, x := range doc.Nftables {
		if x.Set == nil {
			continue
		}
		for _, raw := range x.Set.Elem {
			var e nftElem
			var val struct {
				Prefix *struct {
					Addr string `json:"addr"`
					Len  int    `json:"len"`
				} `json:"prefix"`
			}
			var obj struct {
				Elem struct {
					Val     json.RawMessage `json:"val"`
					Timeout int64           `json:"timeout"`
					Expires int64           `json:"expires"`
				} `json:"elem"`
			}
			if json.Unmarshal(raw, &e.Addr) != nil {
				if err := json.Unmarshal(raw, &obj); err != nil {
					t.Fatalf("nft -j element %s: %v", raw, err)
				}
				e.Timeout, e.Expires = obj.Elem.Timeout, obj.Elem.Expires
				if json.Unmarshal(obj.Elem.Val, &e.Addr) != nil {
					if err := json.Unmarshal(obj.Elem.Val, &val); err != nil || val.Prefix == nil {
						t.Fatalf("nft -j element value %s: %v", obj.Elem.Val, err)
					}
					e.Prefix = val.Prefix.Addr + "/" + strconv.Itoa(val.Prefix.Len)
				}
			}
			els = append(els, e)
		}
	}
	return els
}

func TestKernelDropsBanned(t *testing.T) {
	r := newRig(t)
	client := r.ClientAddr.String()
	steps := []struct {
		name  string
		do    func()
		reach bool
	}{
		{"no ban", func() {}, true},
		{"the client's address banned", func() { r.ban(t, client, protect.BanOptions{For: time.Hour}) }, false},
		{"lifted", func() { r.lift(t, client) }, true},
		{"a range containing it banned", func() { r.ban(t, "10.213.0.0/24", protect.BanOptions{Permanent: true}) }, false},
		{"the range lifted", func() { r.lift(t, "10.213.0.0/24") }, true},
		{"both: the key inside the range", func() {
			r.ban(t, client, protect.BanOptions{For: time.Hour})
			r.ban(t, "10.213.0.0/24", protect.BanOptions{For: 2 * time.Hour})
		}, false},
		{"the range lifted, and with it the key inside it", func() { r.lift(t, "10.213.0.0/24") }, true},
	}
	for _, st := range steps {
		st.do()
		r.sync(t, r.sink)
		if got := r.reaches(t); got != st.reach {
			t.Fatalf("%s: client reaches the server = %v, want %v (set ban4: %+v)", st.name, got, st.reach, r.listSet(t, "ban4"))
		}
	}
	// IPv6: a ban on the client's address holds its counting prefix.
	for _, st := range []struct {
		name  string
		do    func()
		reach bool
	}{
		{"no IPv6 ban", func() {}, true},
		{"another address of the client's /64 banned", func() { r.ban(t, "fd00:213::99", protect.BanOptions{For: time.Hour}) }, false},
		{"lifted", func() { r.lift(t, "fd00:213::99") }, true},
	} {
		st.do()
		r.sync(t, r.sink)
		if got := r.reachesAt(t, r.addr6); got != st.reach {
			t.Fatalf("%s: client reaches the server over IPv6 = %v, want %v (set ban6: %+v)", st.name, got, st.reach, r.listSet(t, "ban6"))
		}
	}
}

func TestElementTimeouts(t *testing.T) {
	r := newRig(t)
	perm := r.ban(t, "192.0.2.7", protect.BanOptions{Permanent: true})
	hour := r.ban(t, "198.51.100.0/24", protect.BanOptions{For: time.Hour})
	six := r.ban(t, "2001:db8:1:2::99", protect.BanOptions{For: time.Hour})
	r.sync(t, r.sink)
	now := time.Now()
	els := r.listSet(t, "ban4")
	if len(els) != 2 {
		t.Fatalf("set ban4 = %+v, want 2 elements", els)
	}
	for _, e := range els {
		switch {
		case e.Addr == perm.Key.String():
			if e.Timeout != 0 || e.Expires != 0 {
				t.Errorf("permanent ban %s: element timeout %ds, expires %ds, want none", perm.Key, e.Timeout, e.Expires)
			}
		case e.Prefix == hour.Key.String():
			left := hour.Left(now)
			if d := time.Duration(e.Expires)*time.Second - left; d.Abs() > time.Second {
				t.Errorf("1-hour ban %s: element expires in %ds, want within 1s of %v", hour.Key, e.Expires, left)
			}
		default:
			t.Errorf("set ban4 element %+v: want %s or %s", e, perm.Key, hour.Key)
		}
	}
	els6 := r.listSet(t, "ban6")
	if len(els6) != 1 || els6[0].Prefix != six.Key.String() {
		t.Fatalf("set ban6 = %+v, want one element %s (the counting prefix)", els6, six.Key)
	}
	// The library's own reading, to the millisecond.
	kernel, err := r.sink.conn.GetSetElements(r.sink.sets[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range kernel {
		if e.IntervalEnd || e.Timeout == 0 {
			continue
		}
		if d := e.Expires - hour.Left(time.Now()); d.Abs() > time.Second {
			t.Errorf("1-hour ban: element expires in %v, ban's time left %v", e.Expires, hour.Left(time.Now()))
		}
	}
}

func TestRestartConverges(t *testing.T) {
	r := newRig(t)
	for _, a := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", r.ClientAddr.String()} {
		r.ban(t, a, protect.BanOptions{For: time.Hour})
	}
	r.sync(t, r.sink)
	// The sink stops: nothing is torn down.
	r.sink.Close()
	if els := r.listSet(t, "ban4"); len(els) != 4 {
		t.Fatalf("after the sink stopped, set ban4 = %+v, want the 4 elements", els)
	}
	if r.reaches(t) {
		t.Fatal("after the sink stopped, the banned client reaches the server")
	}
	// While it is down, one ban is lifted and one added.
	r.lift(t, "192.0.2.1")
	r.ban(t, "192.0.2.9", protect.BanOptions{Permanent: true})
	s := r.open(t)
	gen, err := s.generation()
	if err != nil {
		t.Fatal(err)
	}
	res := r.sync(t, s)
	want := Result{Added: 1, Deleted: 1, Kept: 3, Read: true, Transactions: 1}
	if res != want {
		t.Errorf("first Sync after a restart = %+v, want %+v", res, want)
	}
	if after, _ := s.generation(); after != gen+1 {
		t.Errorf("ruleset generation %d → %d, want one transaction", gen, after)
	}
	if r.reaches(t) {
		t.Error("after the restart, the banned client reaches the server")
	}
	// Nothing changed: no transaction, no read.
	if res := r.sync(t, s); res != (Result{Kept: 4}) {
		t.Errorf("second Sync = %+v, want %+v", res, Result{Kept: 4})
	}
	// Someone else flushes the set: the sink notices and refills it.
	if _, err := r.Exec(r.Server, "nft", "flush", "set", "inet", "protect", "ban4"); err != nil {
		t.Fatal(err)
	}
	if res := r.sync(t, s); res != (Result{Added: 4, Read: true, Transactions: 1}) {
		t.Errorf("Sync after an outside flush = %+v, want %+v", res, Result{Added: 4, Read: true, Transactions: 1})
	}
}

func TestTenThousandBansOneTransaction(t *testing.T) {
	r := newRig(t)
	bans := manyBans(10_000, time.Now())
	gen, err := r.sink.generation()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := r.sink.Sync(context.Background(), bans)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if res.Added != 10_000 || res.Transactions != 1 || r.sink.Transactions() != 1 {
		t.Errorf("Sync of 10k bans = %+v, sink transactions %d, want 10000 added in 1", res, r.sink.Transactions())
	}
	if after, _ := r.sink.generation(); after != gen+1 {
		t.Errorf("ruleset generation %d → %d, want one transaction", gen, after)
	}
	t.Logf("10k bans written in one transaction in %v", took)
	kernel, err := r.sink.conn.GetSetElements(r.sink.sets[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(kernel) != 20_000 {
		t.Errorf("set ban4 holds %d netlink elements, want 20000 (a start and an end per ban)", len(kernel))
	}
}

// manyBans returns n one-hour bans on distinct addresses of 100.64.0.0/10.
func manyBans(n int, now time.Time) []protect.Ban {
	bans := make([]protect.Ban, n)
	for i := range bans {
		bans[i] = ban(now, netipFrom(100, 64+byte(i>>16), byte(i>>8), byte(i)), time.Hour)
	}
	return bans
}

func netipFrom(a, b, c, d byte) string {
	return net.IPv4(a, b, c, d).String()
}

func TestOpenNamesWhatIsMissing(t *testing.T) {
	pair := netnstest.New(t)
	fd := pair.Fd(pair.Server)
	_, err := Open(Options{NetNS: fd})
	want := "nftsink: table inet protect: not found in the ruleset; create it (nft add table inet protect), see docs/firewall.md"
	if err == nil || err.Error() != want {
		t.Fatalf("Open without a table = %v, want %q", err, want)
	}
	if _, err := pair.Exec(pair.Server, "nft", "add", "table", "inet", "protect"); err != nil {
		t.Skip(err)
	}
	_, err = Open(Options{NetNS: fd})
	want = "nftsink: set inet protect ban4: not found in the ruleset; create it (nft add set inet protect ban4 '{ type ipv4_addr; flags interval, timeout; }'), see docs/firewall.md"
	if err == nil || err.Error() != want {
		t.Fatalf("Open without sets = %v, want %q", err, want)
	}
	if _, err := pair.Exec(pair.Server, "nft", "add set inet protect ban4 { type ipv4_addr; flags timeout; }"); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{NetNS: fd})
	want = "nftsink: set inet protect ban4: lacks flags interval (a range ban would hold one address); the sink needs nft add set inet protect ban4 '{ type ipv4_addr; flags interval, timeout; }'"
	if err == nil || err.Error() != want {
		t.Fatalf("Open with a set without interval = %v, want %q", err, want)
	}
	s, err := Open(Options{NetNS: fd, Set4: "made4", Set6: "made6", Create: true})
	if err != nil {
		t.Fatalf("Open with Create: %v", err)
	}
	if s.sets[0].Name != "made4" || s.sets[1].Name != "made6" {
		t.Errorf("Open with Create: sets %q, %q, want made4, made6", s.sets[0].Name, s.sets[1].Name)
	}
}

// BenchmarkSyncTenThousand measures a full refill of 10k bans: a read of
// the kernel's (empty) set and one transaction of 10k elements.
func BenchmarkSyncTenThousand(b *testing.B) {
	pair := netnstest.New(b)
	if _, err := pair.Exec(pair.Server, "nft", "-f", "testdata/protect.nft"); err != nil {
		b.Skip(err)
	}
	s, err := Open(Options{NetNS: pair.Fd(pair.Server)})
	if err != nil {
		b.Fatal(err)
	}
	bans := manyBans(10_000, time.Now())
	for b.Loop() {
		b.StopTimer()
		s.conn.FlushSet(s.sets[0])
		if err := s.conn.Flush(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if res, err := s.Sync(context.Background(), bans); err != nil || res.Added != 10_000 {
			b.Fatalf("Sync = %+v, %v", res, err)
		}
	}
}

// TestSyncAsksTheKernelWhenUnsure takes the sink's clock ahead of the
// kernel's: an element the sink thinks over is still in the kernel, so
// before it writes a ban on the same range it reads the kernel, and
// replaces the element rather than add over it (which would leave the
// kernel's timeout as it was).
func TestSyncAsksTheKernelWhenUnsure(t *testing.T) {
	r := newRig(t)
	clock := testclock.New()
	s, err := Open(Options{NetNS: r.fd, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Sync(context.Background(), []protect.Ban{ban(clock.Now(), "192.0.2.7", time.Hour)}); err != nil || res.Added != 1 {
		t.Fatalf("Sync = %+v, %v; want 1 added", res, err)
	}
	// An hour on by the sink's clock; by the kernel's, a moment.
	clock.Advance(time.Hour + time.Second)
	renewed := ban(clock.Now(), "192.0.2.7", 2*time.Hour)
	res, err := s.Sync(context.Background(), []protect.Ban{renewed})
	if want := (Result{Added: 1, Deleted: 1, Read: true, Transactions: 1}); err != nil || res != want {
		t.Fatalf("Sync of a ban renewed after its element's end by the sink's clock = %+v, %v; want %+v", res, err, want)
	}
	els := r.listSet(t, "ban4")
	if len(els) != 1 || els[0].Addr != "192.0.2.7" || els[0].Expires < 7190 {
		t.Errorf("set ban4 = %+v, want 192.0.2.7 for about two hours", els)
	}
}
