package memstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/httpprotect/protect/store"
)

// The records of a memory store's state file (durable.go). Every time in
// them is absolute: nanoseconds (bans, offenses) or microseconds (plan
// state, as the plans keep it) since the Unix epoch, so that a restored
// ban ends when it would have ended, whenever the file is opened again.
//
// A record's key is its namespace (length first, so that no namespace is
// a prefix of another's keys) and its key: a kind byte and an address
// prefix in netip's binary form, or a name. Its value starts with a
// format version, so that a later layout can be told from this one.
// Every length is checked against what is left: a malformed record is an
// error for that record, never a panic or a read past its end.

const recordVersion = 1

// Kinds of key in a record's key.
const (
	kindAddr  = 'a' // a counting key's address prefix
	kindRange = 'r' // an operator's range ban
	kindName  = 'n' // a consumer key
	// An allowlist entry, on a counting key or on a range: a record of
	// the bans bucket, as a ban's, so that the file's layout and counts
	// are a ban's too.
	kindAllowKey   = 'w'
	kindAllowRange = 'W'
)

var errRecord = errors.New("malformed record")

// diskKey is a record's key, decoded.
type diskKey struct {
	ns   string
	kind byte
	key  store.Key
}

func appendDiskKey(b []byte, ns string, kind byte, k store.Key) []byte {
	b = binary.AppendUvarint(b, uint64(len(ns)))
	b = append(b, ns...)
	b = append(b, kind)
	if kind == kindName {
		return append(b, k.Name...)
	}
	pb, _ := k.Prefix.MarshalBinary() // a valid prefix always marshals
	return append(b, pb...)
}

// decodeDiskKey decodes a record's key; intern, when not nil, makes its
// strings (a restore shares one string per namespace).
func decodeDiskKey(b []byte, intern func([]byte) string) (diskKey, error) {
	r := reader{b: b, intern: intern}
	var dk diskKey
	dk.ns = r.str()
	dk.kind = r.byte()
	rest := r.rest()
	if r.err != nil {
		return diskKey{}, r.err
	}
	switch dk.kind {
	case kindName:
		if len(rest) == 0 {
			return diskKey{}, fmt.Errorf("%w: empty name", errRecord)
		}
		dk.key.Name = string(rest)
	case kindAddr, kindRange, kindAllowKey, kindAllowRange:
		var p netip.Prefix
		if err := p.UnmarshalBinary(rest); err != nil || !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			return diskKey{}, fmt.Errorf("%w: bad prefix", errRecord)
		}
		dk.key.Prefix = p
	default:
		return diskKey{}, fmt.Errorf("%w: key kind %d", errRecord, dk.kind)
	}
	return dk, nil
}

// Sources as one byte.
const (
	sourceAutoByte   = 'a'
	sourceManualByte = 'm'
)

// appendBanValue encodes b's record; end is its expiry in Unix ns (0:
// permanent).
func appendBanValue(buf []byte, b *store.Ban, end int64) []byte {
	buf = append(buf, recordVersion)
	buf = appendStr(buf, b.Reason)
	src := byte(sourceAutoByte)
	if b.Source == store.SourceManual {
		src = sourceManualByte
	}
	buf = append(buf, src)
	buf = appendStr(buf, b.By)
	buf = binary.AppendVarint(buf, b.Created.UnixNano())
	buf = binary.AppendVarint(buf, end)
	return binary.AppendUvarint(buf, uint64(b.Offense))
}

// diskBan is a ban record, decoded: times in Unix ns, end 0 when permanent.
type diskBan struct {
	reason, by string
	source     store.Source
	created    int64
	end        int64
	offense    int
}

// decodeBanValue decodes a ban record; intern is as for decodeDiskKey.
func decodeBanValue(v []byte, intern func([]byte) string) (diskBan, error) {
	r := reader{b: v, intern: intern}
	r.version()
	var d diskBan
	d.reason = r.str()
	switch r.byte() {
	case sourceAutoByte:
		d.source = store.SourceAuto
	case sourceManualByte:
		d.source = store.SourceManual
	default:
		r.fail("source")
	}
	d.by = r.str()
	d.created = r.varint()
	d.end = r.varint()
	off := r.uvarint()
	r.end()
	if r.err != nil {
		return diskBan{}, r.err
	}
	switch {
	case d.end < 0:
		return diskBan{}, fmt.Errorf("%w: negative expiry", errRecord)
	case off > 1<<31:
		return diskBan{}, fmt.Errorf("%w: offense %d", errRecord, off)
	}
	d.offense = int(off)
	return d, nil
}

// appendOffenseValue encodes an offense history: its times and when it
// is forgotten, in Unix ns.
func appendOffenseValue(buf []byte, times []int64, exp int64) []byte {
	buf = append(buf, recordVersion)
	buf = binary.AppendVarint(buf, exp)
	buf = binary.AppendUvarint(buf, uint64(len(times)))
	for _, t := range times {
		buf = binary.AppendVarint(buf, t)
	}
	return buf
}

func decodeOffenseValue(v []byte) (times []int64, exp int64, err error) {
	r := reader{b: v}
	r.version()
	exp = r.varint()
	n := r.count(1)
	if r.err == nil && n > 0 {
		times = make([]int64, n)
		for i := range times {
			times[i] = r.varint()
		}
	}
	r.end()
	return times, exp, r.err
}

// appendPlanValue encodes a plan entry: when it is over, and its slots,
// in µs since the Unix epoch as the plans keep them.
func appendPlanValue(buf []byte, exp int64, slots []planSlot) []byte {
	buf = append(buf, recordVersion)
	buf = binary.AppendVarint(buf, exp)
	buf = binary.AppendUvarint(buf, uint64(len(slots)))
	for i := range slots {
		sl := &slots[i]
		buf = appendStr(buf, sl.name)
		buf = append(buf, byte(sl.quota))
		buf = binary.AppendVarint(buf, sl.a)
		buf = binary.AppendVarint(buf, sl.b)
	}
	return buf
}

func decodePlanValue(v []byte) (exp int64, slots []planSlot, err error) {
	r := reader{b: v}
	r.version()
	exp = r.varint()
	n := r.count(4) // a slot takes at least 4 bytes
	if r.err == nil && n > store.MaxPlanLimits*4 {
		r.fail("too many limits")
	}
	if r.err == nil && n > 0 {
		slots = make([]planSlot, n)
		for i := range slots {
			sl := &slots[i]
			sl.name = r.str()
			if q := store.QuotaPeriod(r.byte()); q <= store.Monthly {
				sl.quota = q
			} else {
				r.fail("quota period")
			}
			sl.a = r.varint()
			sl.b = r.varint()
		}
	}
	r.end()
	return exp, slots, r.err
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader decodes a record, keeping the first error: each read after it
// returns a zero value, so a decoder checks once, at its end.
type reader struct {
	b      []byte
	err    error
	intern func([]byte) string // nil: string(b)
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errRecord, what)
	}
	r.b = nil
}

func (r *reader) version() {
	if v := r.byte(); r.err == nil && v != recordVersion {
		r.fail(fmt.Sprintf("format version %d", v))
	}
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.fail("truncated")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a number of items of at least min bytes each, and fails on
// one that what is left cannot hold, before anything is allocated for it.
func (r *reader) count(min int) int {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)/min) {
		r.fail("count past the end")
		return 0
	}
	return int(n)
}

func (r *reader) str() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.fail("string past the end")
		return ""
	}
	b := r.b[:n]
	r.b = r.b[n:]
	if r.intern != nil {
		return r.intern(b)
	}
	return string(b)
}

func (r *reader) rest() []byte {
	b := r.b
	r.b = nil
	return b
}

func (r *reader) end() {
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
}

// unixTime is a time of the store's location from Unix ns.
func unixTime(ns int64, loc *time.Location) time.Time { return time.Unix(0, ns).In(loc) }
