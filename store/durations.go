package store

import "time"

// MaxDuration is the longest length protect takes for a ban and for each
// duration of a Config: 100 years of 365 days. New and Ban refuse a longer
// one with an error that quotes it. Past it, arithmetic in nanoseconds
// nears the end of time.Duration (292 years) and overflows: a length of
// math.MaxInt64 plus a second of rounding once gave Retry-After:
// -9223372035. A ban meant to last for ever is a permanent one.
const MaxDuration = 100 * 365 * 24 * time.Hour
