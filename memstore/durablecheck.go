package memstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A state file is checked before bbolt opens it. bbolt trusts its pages:
// a page that is not what its parent says (random bytes, a truncated
// file) makes it panic, in goroutines of its own where no caller can
// recover, or read past its mapping. So the file's pages are read here
// first, as bytes, with every length and page number checked: the tree
// of the newest valid meta page is walked as bbolt would walk it, and
// any page that bbolt's own consistency check would refuse (a page that
// is not where it says, of no known type, past the end, reached twice,
// holding keys out of order) is damage. The same walk, told to keep
// records, salvages what the intact pages hold: a damaged page loses
// what is under it, nothing else.
//
// The layout read here is bbolt's (go.etcd.io/bbolt/internal/common),
// version 2, in the machine's byte order, as bbolt writes it.

const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltPageHeader   = 16
	boltElement      = 16 // a branch or leaf element
	boltBucketHeader = 16 // a bucket's root page and sequence
	boltMetaSize     = 64 // the meta fields, checksum last
	boltBranchPage   = 0x01
	boltLeafPage     = 0x02
	boltMetaPage     = 0x04
	boltFreelistPage = 0x10
	boltBucketLeaf   = 0x01
	boltNoFreelist   = ^uint64(0)
	// boltMaxProblems bounds the problems kept for the log.
	boltMaxProblems = 4
)

var ne = binary.NativeEndian

// boltMeta is a meta page's fields.
type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	hwm      uint64 // pages in use: every page number is below it
	txid     uint64
}

// parseMeta reads the meta page at b; ok is bbolt's own test (magic,
// version, checksum).
func parseMeta(b []byte) (m boltMeta, ok bool) {
	if len(b) < boltPageHeader+boltMetaSize {
		return m, false
	}
	f := b[boltPageHeader : boltPageHeader+boltMetaSize]
	h := fnv.New64a()
	h.Write(f[:56])
	if ne.Uint32(f[0:]) != boltMagic || ne.Uint32(f[4:]) != boltVersion || ne.Uint64(f[56:]) != h.Sum64() {
		return m, false
	}
	return boltMeta{pageSize: ne.Uint32(f[8:]), root: ne.Uint64(f[16:]), freelist: ne.Uint64(f[32:]),
		hwm: ne.Uint64(f[40:]), txid: ne.Uint64(f[48:])}, true
}

// hasMagic reports whether b starts like a bbolt meta page, valid or not.
func hasMagic(b []byte) bool {
	return len(b) >= boltPageHeader+4 && ne.Uint32(b[boltPageHeader:]) == boltMagic
}

// fileCheck is what a walk of a state file found.
type fileCheck struct {
	data     []byte // the file
	psize    int
	meta     boltMeta
	metaPage int // the meta page used
	// otherBad: the other meta page is not valid, so bbolt falls back
	// to this one, which may be a transaction older than the file's last.
	otherBad bool
	seen     []bool // by page: reached by the walk
	problems []string
	nproblem int
	// counts holds the records under each bucket of the root.
	counts map[string]int
	// state is the file's own record of itself (stateRecord), when read.
	state *stateRecord
	// format is the meta bucket's format record, when read.
	format []byte
	// keep collects the records of the data buckets, for a salvage.
	keep bool
	recs map[string][][2][]byte
}

func (c *fileCheck) problem(format string, args ...any) {
	c.nproblem++
	if len(c.problems) < boltMaxProblems {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	}
}

// damaged reports whether the walk found anything bbolt must not open.
func (c *fileCheck) damaged() bool { return c.nproblem > 0 || c.otherBad }

// describe is the damage found, for the log.
func (c *fileCheck) describe() string {
	var b bytes.Buffer
	if c.otherBad {
		fmt.Fprintf(&b, "meta page %d not valid, transaction %d read from meta page %d", 1-c.metaPage, c.meta.txid, c.metaPage)
	}
	for _, p := range c.problems {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p)
	}
	if n := c.nproblem - len(c.problems); n > 0 {
		fmt.Fprintf(&b, "; %d more", n)
	}
	return b.String()
}

// errNotBolt is the check's answer on a file that no bbolt wrote: it is
// refused, never moved aside.
var errNotBolt = errors.New("not a state file (no bbolt meta page)")

// checkFile walks data, a state file's bytes (not empty). keep collects
// the records of intact pages. A file of no valid meta page with no
// bbolt magic either is errNotBolt; one with the magic but no valid
// meta page is damage with nothing to read.
func checkFile(data []byte, keep bool) (*fileCheck, error) {
	c := &fileCheck{data: data, counts: map[string]int{}, keep: keep}
	if keep {
		c.recs = map[string][][2][]byte{}
	}
	// The page size as bbolt finds it: the first meta page's, else the
	// second's, tried at each size bbolt tries.
	m0, ok0 := parseMeta(data)
	psize := 0
	if ok0 {
		psize = int(m0.pageSize)
	}
	var m1 boltMeta
	var ok1 bool
	for i := 0; i <= 14 && !ok0; i++ {
		pos := 1024 << i
		if pos >= len(data)-1024 {
			break
		}
		if m, ok := parseMeta(data[pos:]); ok && int(m.pageSize) == pos {
			m1, ok1, psize = m, true, pos
		}
	}
	if ok0 && len(data) >= 2*psize {
		m1, ok1 = parseMeta(data[psize:])
	}
	if !ok0 && !ok1 {
		if hasMagic(data) {
			c.problem("no valid meta page")
			return c, nil
		}
		return nil, errNotBolt
	}
	if psize < 1024 || psize&(psize-1) != 0 {
		c.problem("page size %d", psize)
		return c, nil
	}
	c.psize = psize
	switch {
	case ok0 && (!ok1 || m0.txid >= m1.txid):
		c.meta, c.metaPage, c.otherBad = m0, 0, !ok1
	default:
		c.meta, c.metaPage, c.otherBad = m1, 1, !ok0
	}
	c.seen = make([]bool, len(data)/psize)
	c.seen[0], c.seen[1] = true, true
	if c.meta.freelist != boltNoFreelist {
		c.checkFreelist()
	}
	c.walkBucket("", c.meta.root, nil)
	return c, nil
}

// page returns the bytes of page id and its overflow, or nil with the
// problem noted.
func (c *fileCheck) page(id uint64) []byte {
	if id < 2 || id >= c.meta.hwm {
		c.problem("page %d: out of bounds (%d pages)", id, c.meta.hwm)
		return nil
	}
	ps := uint64(c.psize)
	if (id+1)*ps > uint64(len(c.data)) {
		c.problem("page %d: past the end of the file (%d bytes)", id, len(c.data))
		return nil
	}
	p := c.data[id*ps : (id+1)*ps]
	if got := ne.Uint64(p); got != id {
		c.problem("page %d: identifies as %d", id, got)
		return nil
	}
	over := uint64(ne.Uint32(p[12:]))
	end := id + 1 + over
	if end > c.meta.hwm || end*ps > uint64(len(c.data)) || end < id {
		c.problem("page %d: %d overflow pages past the end", id, over)
		return nil
	}
	for i := id; i < end; i++ {
		if c.seen[i] {
			c.problem("page %d: reached twice", i)
			return nil
		}
	}
	for i := id; i < end; i++ {
		c.seen[i] = true
	}
	return c.data[id*ps : end*ps]
}

func (c *fileCheck) checkFreelist() {
	p := c.page(c.meta.freelist)
	if p == nil {
		return
	}
	if ne.Uint16(p[8:]) != boltFreelistPage {
		c.problem("page %d: freelist of type %#x", c.meta.freelist, ne.Uint16(p[8:]))
		return
	}
	n, off := uint64(ne.Uint16(p[10:])), uint64(boltPageHeader)
	if n == 0xFFFF { // the count is the first id
		if len(p) < boltPageHeader+8 {
			c.problem("page %d: freelist truncated", c.meta.freelist)
			return
		}
		n, off = ne.Uint64(p[boltPageHeader:]), off+8
	}
	if n > (uint64(len(p))-off)/8 {
		c.problem("page %d: freelist of %d ids past its end", c.meta.freelist, n)
		return
	}
	for i := range n {
		if id := ne.Uint64(p[off+8*i:]); id < 2 || id >= c.meta.hwm {
			c.problem("page %d: free page %d out of bounds", c.meta.freelist, id)
			return
		}
	}
}

// walkBucket walks the tree of bucket name (the root: "") from page id;
// lo and hi bound its keys as its parent's separators do.
func (c *fileCheck) walkBucket(name string, id uint64, inline []byte) {
	if inline != nil {
		c.walkLeaf(name, inline, 0, nil, nil, true)
		return
	}
	c.walkPage(name, id, nil, nil, 0)
}

// maxDepth bounds a tree's depth: a real one of 2^64 pages is shallower.
const maxDepth = 64

func (c *fileCheck) walkPage(name string, id uint64, lo, hi []byte, depth int) {
	if depth > maxDepth {
		c.problem("page %d: tree deeper than %d", id, maxDepth)
		return
	}
	p := c.page(id)
	if p == nil {
		return
	}
	switch ne.Uint16(p[8:]) {
	case boltLeafPage:
		c.walkLeaf(name, p, id, lo, hi, false)
	case boltBranchPage:
		n := int(ne.Uint16(p[10:]))
		if n == 0 || boltPageHeader+n*boltElement > len(p) {
			c.problem("page %d: branch of %d elements", id, n)
			return
		}
		keys := make([][]byte, n)
		kids := make([]uint64, n)
		for i := range n {
			e := boltPageHeader + i*boltElement
			k := elemBytes(p, e, uint64(ne.Uint32(p[e:])), uint64(ne.Uint32(p[e+4:])))
			var prev []byte
			if i > 0 {
				prev = keys[i-1]
			}
			if k == nil || !inOrder(prev, k, lo, hi) {
				c.problem("page %d: branch key %d out of place", id, i)
				return
			}
			keys[i], kids[i] = k, ne.Uint64(p[e+8:])
		}
		for i := range n {
			next := hi
			if i+1 < n {
				next = keys[i+1]
			}
			c.walkPage(name, kids[i], keys[i], next, depth+1)
		}
	default:
		c.problem("page %d: type %#x where a branch or leaf belongs", id, ne.Uint16(p[8:]))
	}
}

// elemBytes returns the n bytes at pos past the element at e of page p,
// or nil when they are not all inside p.
func elemBytes(p []byte, e int, pos, n uint64) []byte {
	start := uint64(e) + pos
	end := start + n
	if end > uint64(len(p)) {
		return nil
	}
	return p[start:end:end]
}

// inOrder reports whether k may follow prev (nil: k is first) within
// [lo, hi).
func inOrder(prev, k, lo, hi []byte) bool {
	if prev != nil && bytes.Compare(prev, k) >= 0 {
		return false
	}
	return (lo == nil || bytes.Compare(k, lo) >= 0) && (hi == nil || bytes.Compare(k, hi) < 0)
}

// leafElem returns element i of leaf p; k is nil when its bytes are not
// all inside p.
func leafElem(p []byte, i int) (flags uint32, k, v []byte) {
	e := boltPageHeader + i*boltElement
	flags, pos, ks, vs := ne.Uint32(p[e:]), ne.Uint32(p[e+4:]), ne.Uint32(p[e+8:]), ne.Uint32(p[e+12:])
	kv := elemBytes(p, e, uint64(pos), uint64(ks)+uint64(vs))
	if kv == nil {
		return 0, nil, nil
	}
	return flags, kv[:ks], kv[ks:]
}

// walkLeaf reads the leaf page p (id 0: a bucket held inline).
func (c *fileCheck) walkLeaf(name string, p []byte, id uint64, lo, hi []byte, inline bool) {
	if len(p) < boltPageHeader {
		c.problem("bucket %q: inline page truncated", name)
		return
	}
	if inline && ne.Uint16(p[8:]) != boltLeafPage {
		c.problem("bucket %q: inline page of type %#x", name, ne.Uint16(p[8:]))
		return
	}
	n := int(ne.Uint16(p[10:]))
	if boltPageHeader+n*boltElement > len(p) {
		c.problem("page %d: leaf of %d elements", id, n)
		return
	}
	// The whole page is checked before any of it is used: a page that
	// is wrong anywhere is not trusted anywhere.
	var prev []byte
	for i := range n {
		flags, k, _ := leafElem(p, i)
		// Order is transitive: the first key is checked against lo,
		// the last against hi.
		l, h := lo, hi
		if i > 0 {
			l = nil
		}
		if i < n-1 {
			h = nil
		}
		if k == nil || !inOrder(prev, k, l, h) {
			c.problem("page %d: leaf element %d of bucket %q out of place", id, i, name)
			return
		}
		prev = k
		if bucket := flags&boltBucketLeaf != 0; bucket != (name == "") {
			// The root holds buckets only, and the store's buckets no
			// bucket: either is damage.
			c.problem("page %d: element %d of bucket %q of flags %#x", id, i, name, flags)
			return
		}
	}
	switch {
	case name == string(bucketMeta):
		c.counts[name] += n
		for i := range n {
			_, k, v := leafElem(p, i)
			switch string(k) {
			case string(metaFormat):
				c.format = v
			case string(metaState):
				if st, err := decodeStateRecord(v); err == nil {
					c.state = &st
				}
			}
		}
	case name != "":
		c.counts[name] += n
		if c.keep {
			for i := range n {
				_, k, v := leafElem(p, i)
				c.recs[name] = append(c.recs[name], [2][]byte{k, v})
			}
		}
	default:
		for i := range n {
			_, k, v := leafElem(p, i)
			if len(v) < boltBucketHeader {
				c.problem("page %d: bucket %q of a %d-byte header", id, k, len(v))
				continue
			}
			c.counts[string(k)] += 0
			if root := ne.Uint64(v); root == 0 {
				c.walkBucket(string(k), 0, v[boltBucketHeader:])
			} else {
				c.walkBucket(string(k), root, nil)
			}
		}
	}
}

// newestState looks, in every page of the file, for a root leaf that
// holds a state record of a transaction later than the one read: a
// page a commit wrote before its meta page was lost. It is read only
// when a meta page is not valid.
func (c *fileCheck) newestState() *stateRecord {
	var best *stateRecord
	ps := c.psize
	for id := 2; (id+1)*ps <= len(c.data); id++ {
		p := c.data[id*ps : (id+1)*ps]
		if ne.Uint64(p) != uint64(id) || ne.Uint16(p[8:]) != boltLeafPage {
			continue
		}
		sub := &fileCheck{data: c.data, psize: ps, counts: map[string]int{}}
		sub.walkMetaOf(p)
		if st := sub.state; st != nil && st.txid > c.meta.txid && (best == nil || st.txid > best.txid) {
			best = st
		}
	}
	return best
}

// walkMetaOf reads the meta bucket of root leaf p, if it holds it inline.
func (c *fileCheck) walkMetaOf(p []byte) {
	n := int(ne.Uint16(p[10:]))
	if boltPageHeader+n*boltElement > len(p) {
		return
	}
	for i := range n {
		flags, k, v := leafElem(p, i)
		if k == nil || flags&boltBucketLeaf == 0 || string(k) != string(bucketMeta) {
			continue
		}
		if len(v) >= boltBucketHeader && ne.Uint64(v) == 0 {
			c.walkLeaf(string(bucketMeta), v[boltBucketHeader:], 0, nil, nil, true)
		}
	}
}

var (
	errLocked  = errors.New("locked")
	errNoCheck = errors.New("no check on this system")
)

// precheck is what Open learnt of a file before bbolt opened it.
type precheck struct {
	empty bool       // the file was there, of no byte
	check *fileCheck // nil: no file, or not checked; data is not kept
	// movedTo names the damaged file moved aside; check then holds the
	// records salvaged from it, and newest the record of a transaction
	// the fallback to an older meta page lost.
	movedTo string
	newest  *stateRecord
}

// precheckFile checks the file at path, if there is one, and moves it
// aside when it is damaged, keeping what it could read. The file is
// locked while it is read, as bbolt locks it.
func precheckFile(path string, now time.Time) (*precheck, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return &precheck{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		if errors.Is(err, errNoCheck) {
			return &precheck{}, nil
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() == 0 {
		return &precheck{empty: true}, nil
	}
	data, unmap, err := mapFile(f, fi.Size())
	if err != nil {
		return nil, err
	}
	defer unmap()
	c, err := checkFile(data, false)
	if err != nil {
		return nil, err
	}
	if v := c.format; v != nil && (len(v) != 1 || v[0] != recordVersion) {
		return nil, fmt.Errorf("format %x, want %d: not a state file of this version of protect", v, recordVersion)
	}
	if !c.damaged() {
		c.data, c.format, c.seen = nil, nil, nil
		return &precheck{check: c}, nil
	}
	pc := &precheck{}
	if c.otherBad {
		pc.newest = c.newestState()
	}
	if pc.check, err = checkFile(data, true); err != nil {
		return nil, err
	}
	// The records outlive the mapping.
	for _, recs := range pc.check.recs {
		for i := range recs {
			recs[i][0], recs[i][1] = bytes.Clone(recs[i][0]), bytes.Clone(recs[i][1])
		}
	}
	pc.check.data, pc.check.format, pc.check.seen = nil, nil, nil
	pc.movedTo = path + ".damaged-" + now.UTC().Format("20060102T150405Z")
	for n := 2; ; n++ {
		if _, err := os.Lstat(pc.movedTo); errors.Is(err, fs.ErrNotExist) {
			break
		}
		pc.movedTo = fmt.Sprintf("%s.damaged-%s-%d", path, now.UTC().Format("20060102T150405Z"), n)
	}
	if err := os.Rename(path, pc.movedTo); err != nil {
		return nil, fmt.Errorf("damaged (%s), and it cannot be moved aside: %w", c.describe(), err)
	}
	return pc, nil
}

// writeSalvage writes the records c salvaged into db, a new file.
func writeSalvage(db *bolt.DB, c *fileCheck) error {
	return db.Update(func(tx *bolt.Tx) error {
		st := beginState(tx)
		for _, b := range dataBuckets {
			for _, kv := range c.recs[string(b)] {
				if err := st.put(b, kv[0], kv[1]); err != nil {
					return err
				}
			}
		}
		return st.finish()
	})
}

// report logs, at error level, what the check found lost: the empty
// file, the damaged one moved aside, or a file whose counts are not its
// own record's. st is what the restore read.
func (pc *precheck) report(log *slog.Logger, path string, st restoreStats) {
	switch c := pc.check; {
	case pc.empty:
		log.Error("protect: state file empty: nothing restored", slog.String("file", path))
	case pc.movedTo != "":
		damage := c.describe()
		rec := c.state
		if n := pc.newest; n != nil {
			damage += fmt.Sprintf("; transaction %d lost", n.txid)
			if n.txid > c.meta.txid+1 {
				damage = fmt.Sprintf("%s; transactions %d to %d lost", c.describe(), c.meta.txid+1, n.txid)
			}
			rec = n
		}
		attrs := []any{slog.String("file", path), slog.String("moved_to", pc.movedTo), slog.String("damage", damage),
			slog.Int("bans", st.bans), slog.Int("offenses", st.offenses), slog.Int("plans", st.plans)}
		if rec != nil {
			for _, b := range dataBuckets {
				attrs = append(attrs, slog.Int64(string(b)+"_lost", lost(*rec.count(b), len(c.recs[string(b)]))))
			}
		}
		log.Error("protect: state file damaged: moved aside, what could be read restored", attrs...)
	case c != nil && c.state != nil:
		rec := c.state
		same := rec.txid == c.meta.txid
		attrs := []any{slog.String("file", path), slog.Uint64("txid", c.meta.txid), slog.Uint64("txid_recorded", rec.txid)}
		for _, b := range dataBuckets {
			n := c.counts[string(b)]
			same = same && uint64(n) == *rec.count(b)
			attrs = append(attrs, slog.Int(string(b), n), slog.Uint64(string(b)+"_recorded", *rec.count(b)))
		}
		if !same {
			log.Error("protect: state file holds other records than it recorded: some are lost", attrs...)
		}
	}
}

// lost is recorded less read, never below zero.
func lost(recorded uint64, read int) int64 {
	if recorded <= uint64(read) {
		return 0
	}
	return int64(recorded - uint64(read))
}
