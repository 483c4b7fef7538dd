//go:build linux

package nftsink

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/httpprotect/protect"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// A Sink keeps the sets of its Options equal to the bans it is given.
// Its methods are safe for concurrent use; Syncs run one at a time.
type Sink struct {
	opts Options
	conn *nftables.Conn
	sets [2]*nftables.Set // IPv4, IPv6; nil for a family without a set

	mu sync.Mutex
	// held is what the kernel holds, as the sink last read or wrote it:
	// each element's range and its expiry (zero: permanent).
	held [2]map[span]time.Time
	// gen is the ruleset's generation after the sink's last read or
	// commit; when the kernel's has moved on, someone else changed the
	// ruleset and held is read again.
	gen   uint32
	known bool
	// readTook is how long the last read of the kernel's elements took:
	// each element's time left is told at its own moment of the dump,
	// so an expiry read back may be this much late.
	readTook time.Duration
	// sndbuf is the socket buffer the next batch needs.
	sndbuf atomic.Int64

	transactions atomic.Int64
}

// span is an element's range, as a map key.
type span struct{ first, last netip.Addr }

// Result says what one Sync did.
type Result struct {
	Added, Deleted int // elements written and removed (a changed timeout counts in both)
	Kept           int // elements left as they were
	// Pending counts elements the kernel is about to expire on its own
	// and that are to be written again once it has: the next Sync writes
	// them.
	Pending int
	// Read reports that the kernel's elements were read, rather than
	// known from the sink's last commit.
	Read bool
	// Transactions counts the netlink transactions sent: 0 when nothing
	// changed, 1 otherwise (2 when the first failed and was redone).
	Transactions int
}

const (
	// margin: an element that the kernel expires within it is not
	// deleted (the delete could reach the kernel after the expiry, which
	// fails the whole transaction), nor written over (an add before the
	// expiry would be refused): it ends on its own.
	margin = 250 * time.Millisecond
	// tolerance: a timeout that ends this little before a ban's end is
	// kept.
	tolerance = time.Second
	// lateSlack (and the last read's duration): a timeout that ends this
	// much after a ban's end is kept. The kernel starts each element's
	// clock when it inserts it, seconds after the batch's timeouts were
	// reckoned when the batch is large, and a dump tells each element's
	// time left at its own moment; rewriting such elements would rewrite
	// a large set at every read. An element that outlives its ban is
	// deleted when the ban ends, as one no ban wants.
	lateSlack = time.Minute
	// noTimeout is the timeout the sink gives a permanent element.
	// google/nftables sends a nonzero timeout, in whole milliseconds:
	// this one is sent as an explicit 0, which the kernel holds as no
	// timeout, where an element sent without one takes the set's
	// default timeout and a permanent ban would expire. The kernel tests
	// check both.
	noTimeout = -time.Nanosecond
	// perMessage bounds the set elements of one netlink message, whose
	// element list is one attribute of at most 64 KiB.
	perMessage = 800
	// minSockBuf is the least socket buffer a connection asks for.
	minSockBuf = 4 << 20
)

// Open checks the sets of opts (creating them with opts.Create) and
// returns a Sink that keeps them. A missing table or set, a set of the
// wrong type, or one without the interval and timeout flags, is an error
// that names it and says what to create.
func Open(opts Options) (*Sink, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	s := &Sink{opts: opts}
	s.sndbuf.Store(minSockBuf)
	copts := []nftables.ConnOption{nftables.WithSockOptions(s.sockBuffers)}
	if opts.NetNS != 0 {
		copts = append(copts, nftables.WithNetNSFd(opts.NetNS))
	}
	conn, err := nftables.New(copts...)
	if err != nil {
		return nil, fmt.Errorf("nftsink: netlink: %w", err)
	}
	s.conn = conn
	fam := family(opts.Family)
	table := &nftables.Table{Family: fam, Name: opts.Table}
	if _, err := conn.ListTableOfFamily(opts.Table, fam); err != nil {
		if !missing(err) || !opts.Create {
			return nil, s.lookupErr("table "+opts.Family+" "+opts.Table, err,
				"nft add table "+opts.Family+" "+opts.Table)
		}
		conn.AddTable(table)
		if err := conn.Flush(); err != nil {
			return nil, fmt.Errorf("nftsink: create table %s %s: %w", opts.Family, opts.Table, err)
		}
	}
	for i, name := range []string{opts.Set4, opts.Set6} {
		if name == NoSet {
			continue
		}
		typ := [2]nftables.SetDatatype{nftables.TypeIPAddr, nftables.TypeIP6Addr}[i]
		set, err := conn.GetSetByName(table, name)
		if err != nil {
			if !missing(err) || !opts.Create {
				return nil, s.lookupErr(s.setName(name), err, s.createSet(name, typ))
			}
			set = &nftables.Set{Table: table, Name: name, KeyType: typ, Interval: true, HasTimeout: true}
			if err := conn.AddSet(set, nil); err != nil {
				return nil, fmt.Errorf("nftsink: create %s: %w", s.setName(name), err)
			}
			if err := conn.Flush(); err != nil {
				return nil, fmt.Errorf("nftsink: create %s: %w", s.setName(name), err)
			}
		}
		if err := checkSet(set, typ); err != nil {
			return nil, fmt.Errorf("nftsink: %s: %w; the sink needs %s", s.setName(name), err, s.createSet(name, typ))
		}
		s.sets[i] = set
	}
	return s, nil
}

// missing reports a netlink error that says the object does not exist.
func missing(err error) bool { return errors.Is(err, syscall.ENOENT) }

func (s *Sink) lookupErr(what string, err error, fix string) error {
	switch {
	case missing(err):
		return fmt.Errorf("nftsink: %s: not found in the ruleset; create it (%s), see docs/firewall.md", what, fix)
	case errors.Is(err, syscall.EPERM):
		return fmt.Errorf("nftsink: %s: %w (changing the ruleset needs CAP_NET_ADMIN)", what, err)
	}
	return fmt.Errorf("nftsink: %s: %w", what, err)
}

func (s *Sink) setName(name string) string {
	return "set " + s.opts.Family + " " + s.opts.Table + " " + name
}

func (s *Sink) createSet(name string, typ nftables.SetDatatype) string {
	return fmt.Sprintf("nft add set %s %s %s '{ type %s; flags interval, timeout; }'", s.opts.Family, s.opts.Table, name, typ.Name)
}

// checkSet refuses a set the sink cannot keep right.
func checkSet(set *nftables.Set, typ nftables.SetDatatype) error {
	switch {
	case set.IsMap || set.Constant:
		return errors.New("is a map or constant")
	case set.KeyType.Name != typ.Name:
		return fmt.Errorf("holds %s, not %s", set.KeyType.Name, typ.Name)
	case !set.Interval:
		return errors.New("lacks flags interval (a range ban would hold one address)")
	case !set.HasTimeout:
		return errors.New("lacks flags timeout (an expired ban would be held until the next sync)")
	}
	// A default timeout is no harm: every element the sink writes has
	// its own (noTimeout for a permanent ban).
	return nil
}

func family(f string) nftables.TableFamily {
	switch f {
	case "ip":
		return nftables.TableFamilyIPv4
	case "ip6":
		return nftables.TableFamilyIPv6
	case "bridge":
		return nftables.TableFamilyBridge
	case "netdev":
		return nftables.TableFamilyNetdev
	}
	return nftables.TableFamilyINet
}

// sockBuffers sizes each connection's buffers for the batch at hand, as
// nft does: a batch of many elements is one write, larger than a
// default socket buffer. Forcing needs CAP_NET_ADMIN, which the sink
// needs anyway; without it the default stays.
func (s *Sink) sockBuffers(c *netlink.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	n := int(s.sndbuf.Load())
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, n)
		_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n)
	})
	return nil
}

// Transactions returns the netlink transactions the sink has committed.
func (s *Sink) Transactions() int64 { return s.transactions.Load() }

// Close releases the sink. It leaves the sets as they are.
func (s *Sink) Close() error { return nil }

// Sync makes the sets hold bans (the bans in force; consumer bans and
// bans over are left out) in at most one netlink transaction. It reads
// the kernel's elements at its first call, after a failed commit, and
// whenever someone else has changed the ruleset since its last commit;
// otherwise it compares bans with what it last wrote.
func (s *Sink) Sync(ctx context.Context, bans []protect.Ban) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var res Result
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		now := s.opts.Clock()
		v4, v6 := Elements(bans, now)
		if gen, err := s.generation(); err != nil || !s.known || gen != s.gen {
			if err := s.read(); err != nil {
				return res, err
			}
			res.Read = true
		}
		p := s.plan([2][]Element{v4, v6}, now)
		if p.stale && !res.Read {
			// The kernel may still hold an element the sink thinks over
			// (its clock is the store's): ask it rather than guess.
			if err := s.read(); err != nil {
				return res, err
			}
			res.Read = true
			p = s.plan([2][]Element{v4, v6}, now)
		}
		res.Added, res.Deleted, res.Kept, res.Pending = p.added, p.deleted, p.kept, p.pending
		if p.added == 0 && p.deleted == 0 {
			return res, nil
		}
		err := s.commit(p, now)
		res.Transactions++
		if err == nil {
			return res, nil
		}
		s.known = false
		if attempt > 0 {
			return res, fmt.Errorf("nftsink: write %s %s: %w", s.opts.Family, s.opts.Table, err)
		}
	}
}

// plan is one Sync's changes, per family.
type plan struct {
	del, add                      [2][]Element
	added, deleted, kept, pending int
	// stale: an element to add is one the sink wrote and thinks over,
	// which the kernel may hold yet (an add over it would leave the
	// kernel's timeout as it was).
	stale bool
}

func (s *Sink) plan(want [2][]Element, now time.Time) plan {
	var p plan
	soon := now.Add(margin)
	alive := func(exp time.Time) bool { return exp.IsZero() || exp.After(soon) }
	for f := range 2 {
		if s.sets[f] == nil {
			continue
		}
		cur := s.held[f]
		wanted := make(map[span]bool, len(want[f]))
		for _, e := range want[f] {
			sp := span{e.First, e.Last}
			wanted[sp] = true
			exp, ok := cur[sp]
			switch {
			case ok && alive(exp) && s.sameExpiry(exp, e.Expires):
				p.kept++
			case ok && alive(exp):
				p.del[f] = append(p.del[f], Element{First: e.First, Last: e.Last})
				p.add[f] = append(p.add[f], e)
			case ok && exp.After(now):
				p.pending++
			case ok:
				p.stale = true
				p.add[f] = append(p.add[f], e)
			default:
				p.add[f] = append(p.add[f], e)
			}
		}
		for sp, exp := range cur {
			if !wanted[sp] && alive(exp) {
				p.del[f] = append(p.del[f], Element{First: sp.first, Last: sp.last})
			}
		}
		p.added += len(p.add[f])
		p.deleted += len(p.del[f])
	}
	return p
}

// sameExpiry reports whether an element the kernel holds until held
// keeps a ban that ends at want: both permanent, or held from tolerance
// before want to lateSlack and the last read's duration after it.
func (s *Sink) sameExpiry(held, want time.Time) bool {
	if held.IsZero() || want.IsZero() {
		return held.IsZero() == want.IsZero()
	}
	d := held.Sub(want)
	return -tolerance <= d && d <= lateSlack+s.readTook
}

// commit sends p as one batch: every deletion, then every addition, so
// that an element replaced or widened is never absent from the ruleset
// the packet path sees.
func (s *Sink) commit(p plan, now time.Time) error {
	s.sndbuf.Store(max(minSockBuf, int64(p.added+p.deleted)*2*96+1<<20))
	for f := range 2 {
		if err := s.queue(f, p.del[f], false, now); err != nil {
			return err
		}
	}
	for f := range 2 {
		if err := s.queue(f, p.add[f], true, now); err != nil {
			return err
		}
	}
	if err := s.conn.Flush(); err != nil {
		return err
	}
	s.transactions.Add(1)
	for f := range 2 {
		if s.held[f] == nil {
			s.held[f] = map[span]time.Time{}
		}
		for _, e := range p.del[f] {
			delete(s.held[f], span{e.First, e.Last})
		}
		for _, e := range p.add[f] {
			s.held[f][span{e.First, e.Last}] = e.Expires
		}
	}
	gen, err := s.generation()
	s.gen, s.known = gen, err == nil
	return nil
}

// queue adds the messages that delete or add els in family f's set.
func (s *Sink) queue(f int, els []Element, add bool, now time.Time) error {
	if len(els) == 0 {
		return nil
	}
	msg := make([]nftables.SetElement, 0, min(perMessage, 2*len(els)))
	flush := func() error {
		if len(msg) == 0 {
			return nil
		}
		var err error
		if add {
			err = s.conn.SetAddElements(s.sets[f], msg)
		} else {
			err = s.conn.SetDeleteElements(s.sets[f], msg)
		}
		msg = msg[:0:0]
		return err
	}
	for _, e := range els {
		start := nftables.SetElement{Key: e.First.AsSlice()}
		switch {
		case add && e.Expires.IsZero():
			start.Timeout = noTimeout
		case add:
			start.Timeout = timeout(e.Expires.Sub(now))
		}
		msg = append(msg, start)
		if end := e.Last.Next(); end.IsValid() {
			msg = append(msg, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
		if len(msg) >= perMessage-1 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// timeout is d in the kernel's whole milliseconds, rounded up and at
// least one: an element written with no timeout would never expire.
func timeout(d time.Duration) time.Duration {
	return max(d+time.Millisecond-1, time.Millisecond).Truncate(time.Millisecond)
}

// read checks the sets again, as a reload of the ruleset may have made
// them anew with other flags, and replaces held with the kernel's
// elements. A set the sink cannot keep right is an error that names it.
func (s *Sink) read() error {
	s.known = false
	start := time.Now()
	for f := range 2 {
		if s.sets[f] == nil {
			continue
		}
		name := s.sets[f].Name
		set, err := s.conn.GetSetByName(s.sets[f].Table, name)
		if err != nil {
			return s.lookupErr(s.setName(name), err, s.createSet(name, s.sets[f].KeyType))
		}
		if err := checkSet(set, s.sets[f].KeyType); err != nil {
			return fmt.Errorf("nftsink: %s: %w; the sink needs %s", s.setName(name), err, s.createSet(name, s.sets[f].KeyType))
		}
		s.sets[f] = set
		els, err := s.conn.GetSetElements(set)
		if err != nil {
			return fmt.Errorf("nftsink: read %s: %w", s.setName(name), err)
		}
		// Each time left is told during the dump: reckoned from its end,
		// an expiry is late rather than early.
		s.held[f] = spans(els, s.opts.Clock())
	}
	s.readTook = time.Since(start)
	gen, err := s.generation()
	s.gen, s.known = gen, err == nil
	return nil
}

// spans pairs the kernel's interval elements (a start, then the end one
// past its last address, which carries no timeout) into ranges with
// their expiries. A start without an end runs to the end of the address
// space; an end without a start (what nft writes below the first range,
// or what an expired start leaves) is no range.
func spans(els []nftables.SetElement, now time.Time) map[span]time.Time {
	slices.SortFunc(els, func(a, b nftables.SetElement) int {
		ka, _ := netip.AddrFromSlice(a.Key)
		kb, _ := netip.AddrFromSlice(b.Key)
		if c := ka.Compare(kb); c != 0 {
			return c
		}
		switch { // an end before a start at the same address
		case a.IntervalEnd == b.IntervalEnd:
			return 0
		case a.IntervalEnd:
			return -1
		}
		return 1
	})
	out := make(map[span]time.Time, len(els)/2)
	for i := 0; i < len(els); i++ {
		e := els[i]
		if e.IntervalEnd {
			continue
		}
		first, ok := netip.AddrFromSlice(e.Key)
		if !ok {
			continue
		}
		var last netip.Addr
		if i+1 < len(els) && els[i+1].IntervalEnd {
			end, _ := netip.AddrFromSlice(els[i+1].Key)
			last = end.Prev()
			i++
		} else {
			last = lastAddr(netip.PrefixFrom(first, 0))
		}
		// An element that took the set's default timeout carries no
		// timeout of its own, only its time left.
		var exp time.Time
		if e.Timeout != 0 || e.Expires != 0 {
			exp = now.Add(e.Expires)
		}
		out[span{first, last}] = exp
	}
	return out
}

// generation asks the kernel for the ruleset's generation, which every
// committed transaction moves on.
func (s *Sink) generation() (uint32, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: s.opts.NetNS})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN),
			Flags: netlink.Request,
		},
		Data: []byte{unix.AF_UNSPEC, 0, 0, 0},
	})
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return 0, err
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				return ad.Uint32(), nil
			}
		}
	}
	return 0, errors.New("nftsink: no generation in the kernel's answer")
}
