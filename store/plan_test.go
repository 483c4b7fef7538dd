package store

import (
	"math/big"
	"testing"
	"time"
)

// left, GCRA's "how many tokens are there", estimated in floating point
// and corrected, equals the exact quotient.
func FuzzRateLeft(f *testing.F) {
	f.Add(int64(5), int64(1_000_000), int64(10), int64(400_000), int64(0))
	f.Add(int64(1<<32), int64(3_600_000_000), int64(1<<32), int64(1_800_000_000), int64(12345))
	f.Add(int64(3), int64(1_000_000), int64(3), int64(333_333), int64(2))
	f.Add(int64(1<<50), int64(1), int64(1<<50), int64(0), int64(1<<49))
	f.Fuzz(func(t *testing.T, limit, period, burst, backlog, rem int64) {
		l, err := newRate(Rate{Limit: limit, Period: time.Duration(period) * time.Microsecond, Burst: burst})
		if err != nil {
			return
		}
		rem = min(max(rem, 0), l.Limit-1)
		now := int64(1_800_000_000_000_000)
		tat := now + min(max(backlog, 0), l.tq)
		got := l.left(now, tat, rem)
		// floor(((now − tat + depth) × Limit + depth's remainder − rem) / Period)
		n := new(big.Int).Mul(big.NewInt(now-tat+l.tq), big.NewInt(l.Limit))
		n.Add(n, big.NewInt(l.tr-rem))
		want := int64(0)
		if n.Sign() > 0 {
			want = min(new(big.Int).Quo(n, big.NewInt(l.period)).Int64(), l.burst)
		}
		if got != want {
			t.Fatalf("left(limit %d, period %dµs, burst %d, backlog %d, rem %d) = %d, want %d", limit, period, burst, tat-now, rem, got, want)
		}
	})
}
