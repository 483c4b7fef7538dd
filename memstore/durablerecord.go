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
	k, err := decodeKey(dk.kind, rest)
	if err != nil {
		return diskKey{}, err
	}
	dk.key = k
	return dk, nil
}

// decodeKey decodes a key of kind from its bytes.
func decodeKey(kind byte, b []byte) (store.Key, error) {
	switch kind {
	case kindName:
		if len(b) == 0 {
			return store.Key{}, fmt.Errorf("%w: empty name", errRecord)
		}
		return store.Key{Name: string(b)}, nil
	case kindAddr, kindRange, kindAllowKey, kindAllowRange:
		var p netip.Prefix
		if err := p.UnmarshalBinary(b); err != nil || !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			return store.Key{}, fmt.Errorf("%w: bad prefix", errRecord)
		}
		return store.Key{Prefix: p}, nil
	default:
		return store.Key{}, fmt.Errorf("%w: key kind %d", errRecord, kind)
	}
}

// A journal event's record (durablejournal.go) is keyed by its
// namespace (length first) and its sequence number (8 bytes, big
// endian, so that a namespace's events are in order). Its value is the
// event: its kind, its time, the number of its run's first event, and
// the ban it names (its key, whether a range, and the ban's record).
//
// A bookmark's record is keyed by its namespace and its name; its value
// is its text and its expiry.

// seqBytes is the size of a sequence number in a journal record's key.
const seqBytes = 8

// appendJournalKey encodes the key of event seq of namespace ns.
func appendJournalKey(b []byte, ns string, seq uint64) []byte {
	b = appendStr(b, ns)
	return binary.BigEndian.AppendUint64(b, seq)
}

// decodeJournalKey decodes a journal record's key.
func decodeJournalKey(b []byte, intern func([]byte) string) (ns string, seq uint64, err error) {
	r := reader{b: b, intern: intern}
	ns = r.str()
	rest := r.rest()
	switch {
	case r.err != nil:
		return "", 0, r.err
	case len(rest) != seqBytes:
		return "", 0, fmt.Errorf("%w: sequence number of %d bytes", errRecord, len(rest))
	}
	seq = binary.BigEndian.Uint64(rest)
	if seq == 0 || seq > maxSeq {
		return "", 0, fmt.Errorf("%w: sequence number %d", errRecord, seq)
	}
	return ns, seq, nil
}

// diskEvent is a journal record's value, decoded: times in Unix ns.
type diskEvent struct {
	kind store.EventKind
	t    int64
	run  uint64 // the sequence number of the first event of its run
	key  store.Key
	rng  bool
	ban  diskBan
}

// appendEventValue encodes an event of kind at t (Unix ns) about b,
// ending at end (Unix ns, 0: permanent), of the run whose first event
// is numbered run.
func appendEventValue(buf []byte, kind store.EventKind, t int64, run uint64, b *store.Ban, end int64) []byte {
	buf = append(buf, recordVersion, byte(kind))
	buf = binary.AppendVarint(buf, t)
	buf = binary.AppendUvarint(buf, run)
	kk := byte(kindAddr)
	switch {
	case b.Range:
		kk = kindRange
	case !b.Key.Prefix.IsValid():
		kk = kindName
	}
	buf = append(buf, kk)
	if kk == kindName {
		buf = appendStr(buf, b.Key.Name)
	} else {
		pb, _ := b.Key.Prefix.MarshalBinary() // a valid prefix always marshals
		buf = binary.AppendUvarint(buf, uint64(len(pb)))
		buf = append(buf, pb...)
	}
	return appendBanValue(buf, b, end)
}

// decodeEventValue decodes a journal record's value; intern is as for
// decodeDiskKey.
func decodeEventValue(v []byte, intern func([]byte) string) (diskEvent, error) {
	r := reader{b: v}
	r.version()
	var d diskEvent
	d.kind = store.EventKind(r.byte())
	if d.t = r.varint(); d.t < 0 {
		r.fail("negative time")
	}
	d.run = r.uvarint()
	kk := r.byte()
	kb := r.bytes()
	ban := r.rest()
	if r.err != nil {
		return diskEvent{}, r.err
	}
	if d.kind.String() == "" {
		return diskEvent{}, fmt.Errorf("%w: event kind %d", errRecord, d.kind)
	}
	if d.run == 0 || d.run > maxSeq {
		return diskEvent{}, fmt.Errorf("%w: run %d", errRecord, d.run)
	}
	if kk != kindAddr && kk != kindRange && kk != kindName {
		return diskEvent{}, fmt.Errorf("%w: key kind %d", errRecord, kk)
	}
	k, err := decodeKey(kk, kb)
	if err != nil {
		return diskEvent{}, err
	}
	d.key, d.rng = k, kk == kindRange
	if d.ban, err = decodeBanValue(ban, intern); err != nil {
		return diskEvent{}, err
	}
	return d, nil
}

// appendMarkKey encodes the key of bookmark name of namespace ns.
func appendMarkKey(b []byte, ns, name string) []byte {
	return append(appendStr(b, ns), name...)
}

// decodeMarkKey decodes a bookmark record's key.
func decodeMarkKey(b []byte, intern func([]byte) string) (ns, name string, err error) {
	r := reader{b: b, intern: intern}
	ns = r.str()
	rest := r.rest()
	if r.err != nil {
		return "", "", r.err
	}
	return ns, string(rest), nil
}

// appendMarkValue encodes a bookmark's text and expiry (Unix ns).
func appendMarkValue(buf []byte, text string, exp int64) []byte {
	buf = append(buf, recordVersion)
	buf = appendStr(buf, text)
	return binary.AppendVarint(buf, exp)
}

// decodeMarkValue decodes a bookmark record's value.
func decodeMarkValue(v []byte) (text string, exp int64, err error) {
	r := reader{b: v}
	r.version()
	text = r.str()
	exp = r.varint()
	r.end()
	return text, exp, r.err
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

// str reads a length and as many bytes, as a string: interned when r
// interns.
func (r *reader) str() string {
	b := r.bytes()
	if r.intern != nil && r.err == nil {
		return r.intern(b)
	}
	return string(b)
}

// bytes reads a length and as many bytes, without copying them.
func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("bytes past the end")
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
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
