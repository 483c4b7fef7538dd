package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/httpprotect/protect"
)

// reloadOnHangup checks every block list file and URL again at each
// SIGHUP, as fail2ban and most daemons reload on one, so that a cron job
// that fetched a list need not wait for the next Refresh. The returned
// stop ends it.
func reloadOnHangup(ctx context.Context, p *protect.Protector, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-hup:
				if err := p.ReloadBlockLists(ctx); err != nil {
					log.Warn("SIGHUP: block lists not all reloaded", "err", err.Error())
				} else {
					log.Info("SIGHUP: block lists checked")
				}
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-ended
	}
}
