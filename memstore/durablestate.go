package memstore

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// A state file keeps a record of itself in its meta bucket: the
// transaction that wrote it last and how many records each bucket
// holds. Every write of the store updates it in the same transaction,
// so at open a file whose buckets hold other counts, or whose last
// transaction is not the record's, lost records (a page written back
// from before, a program other than the store) and the open says how
// many. A transaction whose meta page is lost leaves its record on a
// page of the file: the check finds it (fileCheck.newestState) and says
// what the fallback to the meta page before lost.

var metaState = []byte("state")

// stateRecord is the file's record of itself.
type stateRecord struct {
	txid                  uint64
	bans, offenses, plans uint64
	events, marks         uint64
}

func (r stateRecord) encode() []byte {
	b := []byte{recordVersion}
	for _, v := range []uint64{r.txid, r.bans, r.offenses, r.plans, r.events, r.marks} {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

// decodeStateRecord decodes a state record; one that counts no journal
// and no bookmarks (a file that held none) counts them 0.
func decodeStateRecord(v []byte) (stateRecord, error) {
	r := reader{b: v}
	r.version()
	st := stateRecord{txid: r.uvarint(), bans: r.uvarint(), offenses: r.uvarint(), plans: r.uvarint()}
	if r.err == nil && len(r.b) > 0 {
		st.events, st.marks = r.uvarint(), r.uvarint()
	}
	r.end()
	return st, r.err
}

// count returns the bucket's count field.
func (r *stateRecord) count(bucket []byte) *uint64 {
	switch string(bucket) {
	case string(bucketBans):
		return &r.bans
	case string(bucketOffenses):
		return &r.offenses
	case string(bucketJournal):
		return &r.events
	case string(bucketMarks):
		return &r.marks
	default:
		return &r.plans
	}
}

// stateTx writes the records of one transaction and keeps the state
// record's counts.
type stateTx struct {
	tx  *bolt.Tx
	rec stateRecord
}

// beginState reads tx's state record; a file without one (or with one
// that does not decode) is counted.
func beginState(tx *bolt.Tx) *stateTx {
	st := &stateTx{tx: tx}
	if rec, err := decodeStateRecord(tx.Bucket(bucketMeta).Get(metaState)); err == nil {
		st.rec = rec
		return st
	}
	for _, b := range dataBuckets {
		*st.rec.count(b) = uint64(countKeys(tx.Bucket(b)))
	}
	return st
}

// countKeys counts b's records.
func countKeys(b *bolt.Bucket) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
}

// put writes val at key of bucket, or deletes key when val is nil.
func (st *stateTx) put(bucket, key, val []byte) error {
	b := st.tx.Bucket(bucket)
	had := b.Get(key) != nil
	n := st.rec.count(bucket)
	if val == nil {
		if !had {
			return nil
		}
		if *n > 0 {
			*n--
		}
		return b.Delete(key)
	}
	if !had {
		*n++
	}
	return b.Put(key, val)
}

// finish writes the state record.
func (st *stateTx) finish() error {
	st.rec.txid = uint64(st.tx.ID())
	if err := st.tx.Bucket(bucketMeta).Put(metaState, st.rec.encode()); err != nil {
		return fmt.Errorf("state record: %w", err)
	}
	return nil
}
