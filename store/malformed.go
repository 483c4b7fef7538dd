package store

import (
	"errors"
	"strconv"
)

// Damaged records. A store outside this process holds its records as
// text that anyone with access to it can write: a record the store
// cannot read (a ban record an operator typed by hand, a field cut
// short) is damage to that one record, not a failure of the store. If it
// counted as a failure, one bad key would open the circuit breaker that
// every client shares, and every client would be decided by the failure
// policy for as long as the key exists.
//
// So a store reports such a record with an error that wraps ErrMalformed,
// and the Protector never counts it toward the breaker. The contract:
//
//   - Take and TakePlan decide as if the record were absent (an
//     unreadable ban refuses nothing: a ban is only as good as what it
//     says, and a record that says nothing readable cannot say for how
//     long) and return that Result together with the error. The
//     Protector uses the Result, counts the call in Stats.Malformed, and
//     logs each damaged record once, with the store's key, rather than
//     once per request.
//   - Bans, Inspect, Lift and LiftBans report the record as a Ban whose
//     Malformed field says what is wrong, with a nil error: an operator
//     sees it in protectctl bans and inspect, and lifting it deletes it
//     and reports it lifted.
//
// A LocalSpace keeps its records as Go values and has none to report.

// ErrMalformed is wrapped by the errors a store returns for a record it
// holds but cannot read (a *MalformedError). It is not a store failure:
// the guard never counts it toward the circuit breaker.
var ErrMalformed = errors.New("protect: malformed record")

// ErrNotAcknowledged is wrapped by the error of a call that the store
// answered without acknowledging it: a count fewer replicas received
// than asked (redisstore.ErrNotReplicated), a Cluster node that says the
// key lives elsewhere. The failure policy decides the request, as for
// any store error, and Stats counts it among StoreErrors; but it is no
// failure to the circuit breaker, which every key shares: the store is
// up, and one master's lost replica or one migrating slot must not turn
// it off for the keys of every other.
var ErrNotAcknowledged = errors.New("protect: not acknowledged by the store")

// A MalformedError reports one record a store cannot read. Its zero value
// names no record. errors.Is(err, ErrMalformed) holds for every
// MalformedError.
type MalformedError struct {
	// Key is where the store holds the record, in the store's own terms:
	// the Redis key, "protect:{198.51.100.7}:b".
	Key string
	// Record is the record's text, cut to MaxMalformedText bytes.
	Record string
	// Err says what is wrong with it.
	Err error
}

// MaxMalformedText is how much of a damaged record MalformedError and
// Ban.Malformed quote: enough to recognise it, never a store's whole
// value in a log line.
const MaxMalformedText = 128

// QuoteMalformed quotes rec for MalformedError.Record and Ban.Malformed:
// Go syntax, cut to MaxMalformedText bytes of the record, with its full
// length when it was cut.
func QuoteMalformed(rec string) string {
	if len(rec) <= MaxMalformedText {
		return strconv.Quote(rec)
	}
	return strconv.Quote(rec[:MaxMalformedText]) + "... (" + strconv.Itoa(len(rec)) + " bytes)"
}

func (e *MalformedError) Error() string {
	msg := "protect: malformed record at " + e.Key
	if e.Record != "" {
		msg += " " + e.Record
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns what is wrong with the record.
func (e *MalformedError) Unwrap() error { return e.Err }

// Is reports whether target is ErrMalformed.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }
