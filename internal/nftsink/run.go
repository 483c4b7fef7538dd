package nftsink

import (
	"context"
	"log/slog"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// A Lister lists the bans in force; *admin.Admin is one.
type Lister interface {
	Bans(ctx context.Context, f admin.Filter) ([]protect.Ban, error)
}

// RunOptions tune Run. The zero value polls every DefaultEvery and logs
// to slog's default logger.
type RunOptions struct {
	// Every is the time between two listings of the bans [DefaultEvery].
	Every  time.Duration
	Logger *slog.Logger
}

// DefaultEvery is how often Run lists the bans by default: a ban or a
// lift reaches the kernel within this and one listing.
const DefaultEvery = 500 * time.Millisecond

// Run keeps s equal to src's bans until ctx ends, listing them every
// opt.Every (or, when a poll takes longer, as long again after it); its
// first Sync is a full refill. A failed listing or write
// is logged, once until it succeeds again, and retried at the next tick:
// meanwhile the kernel keeps what it holds, and its timeouts keep it
// right. Run returns when ctx ends, leaving the sets as they are.
func Run(ctx context.Context, s *Sink, src Lister, opt RunOptions) {
	every := opt.Every
	if every <= 0 {
		every = DefaultEvery
	}
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTimer(0)
	defer t.Stop()
	failing := false
	for {
		start := time.Now()
		err := runOnce(ctx, s, src, log)
		// A poll that takes longer than every (a list of a great many
		// bans) is followed by a pause as long as itself: the sink never
		// spends more than half of a core listing.
		t.Reset(max(every, time.Since(start)))
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			log.Error("nftables sink", "sets", s.opts.String(), "err", err.Error())
			failing = true
		case err == nil && failing:
			log.Info("nftables sink: in sync again", "sets", s.opts.String())
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func runOnce(ctx context.Context, s *Sink, src Lister, log *slog.Logger) error {
	bans, err := src.Bans(ctx, admin.Filter{})
	if err != nil {
		return err
	}
	res, err := s.Sync(ctx, bans)
	if err != nil {
		return err
	}
	if res.Added > 0 || res.Deleted > 0 {
		log.Info("nftables sink", "sets", s.opts.String(), "added", res.Added, "deleted", res.Deleted, "kept", res.Kept)
	}
	return nil
}
