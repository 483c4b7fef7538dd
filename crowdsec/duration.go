package crowdsec

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// ParseDuration parses the duration of a decision as the LAPI sends it:
// Go's form ("3h59m58.123456789s", "-1.5s" for one already over,
// "-21.741432ms"), with fractions in any unit ("1.5h", as 1.4 writes some),
// and a day unit ("7d", "1d12h") that cscli accepts on input. A value
// that is none of these is an error: the caller skips that decision.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	// Days: a leading "Nd" (N possibly a fraction), then Go's form.
	neg := false
	rest := s
	if r, ok := strings.CutPrefix(rest, "-"); ok {
		neg, rest = true, r
	}
	days, after, ok := strings.Cut(rest, "d")
	if !ok || days == "" {
		return 0, errors.New("crowdsec: duration " + strconv.Quote(s) + ": not a duration")
	}
	n, err := strconv.ParseFloat(days, 64)
	// !(n >= 0) rejects NaN too, which ParseFloat reads from "NaN".
	if err != nil || !(n >= 0) || n > float64(1<<63-1)/float64(24*time.Hour) {
		return 0, errors.New("crowdsec: duration " + strconv.Quote(s) + ": not a duration")
	}
	d := time.Duration(n * float64(24*time.Hour))
	if after != "" {
		more, err := time.ParseDuration(after)
		if err != nil || more < 0 || d > 1<<63-1-more {
			return 0, errors.New("crowdsec: duration " + strconv.Quote(s) + ": not a duration")
		}
		d += more
	}
	if neg {
		d = -d
	}
	return d, nil
}
