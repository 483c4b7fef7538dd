package protect

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/httpprotect/protect/internal/clientaddr"
	"github.com/httpprotect/protect/internal/testclock"
)

// fakeClock is a clock tests move by hand, so that nothing sleeps.
type fakeClock = testclock.Clock

var newFakeClock = testclock.New

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newTestProtector returns a protector on a memory store with a fake clock.
func newTestProtector(t *testing.T, cfg Config) (*Protector, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	if cfg.Clock == nil {
		cfg.Clock = clk.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = discardLogger()
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, clk
}

// sendAll makes n verifications through verify, one by one or all at once,
// and counts the outcomes. Any error, returned or absorbed, fails the test.
func sendAll(t *testing.T, n int, concurrent bool, verify func(i int) (Decision, error)) tally {
	t.Helper()
	got := tally{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		one := func() {
			d, err := verify(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || d.Err != nil {
				t.Errorf("verify(%d) = %v, Err %v; want no error", i, err, d.Err)
			}
			got[d.Status]++
		}
		if concurrent {
			wg.Go(one)
		} else {
			one()
		}
	}
	wg.Wait()
	return got
}

// target is what Ban and Lift make of s: admin.Admin.Target, for the
// tests of this package.
func (p *Protector) target(s string) (Key, bool, error) {
	t, err := clientaddr.ParseTarget(s, p.agg)
	return t.Key, t.IsRange, err
}

// inspect reports k's state in p's space, as admin.Admin.InspectKey does.
func (p *Protector) inspect(ctx context.Context, k Key) (KeyState, error) {
	return p.space.Inspect(ctx, k)
}

// liftAll lifts every ban of p, as admin.Admin.LiftAll does: both
// address families, then each consumer key.
func (p *Protector) liftAll(ctx context.Context, by string) ([]Ban, error) {
	var lifted []Ban
	for _, target := range []string{"0.0.0.0/0", "::/0"} {
		got, err := p.Lift(ctx, target, by)
		lifted = append(lifted, got...)
		if err != nil {
			return lifted, err
		}
	}
	bans, err := p.bans(ctx, BanFilter{})
	if err != nil {
		return lifted, err
	}
	for _, b := range bans {
		if !b.Key.Prefix.IsValid() {
			got, err := p.Lift(ctx, ConsumerPrefix+b.Key.Name, by)
			lifted = append(lifted, got...)
			if err != nil {
				return lifted, err
			}
		}
	}
	return lifted, nil
}
