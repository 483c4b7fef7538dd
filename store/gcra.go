package store

// GCRA, the integer arithmetic of the generic cell rate
// algorithm that every store computes alike: the memory store
// in Go, the Redis store in Lua. Times are whole microseconds; a rate of
// Limit requests per Period advances a bucket's theoretical arrival time
// by Period/Limit µs a request, which is kept exactly as a quotient and a
// remainder (q µs + r/Limit µs), so that no store rounds a rate another
// store would not.

import "math/bits"

// GCRASplit returns n × period / limit as q + r/limit, computed in 128 bits;
// ok is false when the quotient does not fit in max.
func GCRASplit(n, period, limit, max int64) (q, r int64, ok bool) {
	hi, lo := bits.Mul64(uint64(n), uint64(period))
	if hi >= uint64(limit) {
		return 0, 0, false
	}
	qq, rr := bits.Div64(hi, lo, uint64(limit))
	if qq > uint64(max) {
		return 0, 0, false
	}
	return int64(qq), int64(rr), true
}
