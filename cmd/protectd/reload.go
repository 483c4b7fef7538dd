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
	end := reloadLoop(ctx, hup, p.ReloadBlockLists, log)
	return func() {
		signal.Stop(hup)
		end()
	}
}

// reloadLoop calls reload for each value from hup, never waiting on it:
// a hangup while a reload runs asks for one more after it, and any
// number of them during one reload ask for that one. protect checks its
// lists side by side, each within its deadline, so a slow list's server
// delays no other list. The returned end stops the loop and waits for a
// reload running, whose context it cancels.
func reloadLoop[T any](ctx context.Context, hup <-chan T, reload func(context.Context) error, log *slog.Logger) (end func()) {
	ctx, cancel := context.WithCancel(ctx)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		done := make(chan error, 1)
		running, again := false, false
		start := func() {
			running = true
			go func() { done <- reload(ctx) }()
		}
		for {
			select {
			case <-hup:
				if !running {
					start()
					continue
				}
				if !again {
					log.Info("SIGHUP: a reload is running; one more follows it")
				}
				again = true
			case err := <-done:
				running = false
				if err != nil {
					log.Warn("SIGHUP: block lists not all reloaded", "err", err.Error())
				} else {
					log.Info("SIGHUP: block lists checked")
				}
				if again {
					again = false
					start()
				}
			case <-ctx.Done():
				if running {
					<-done
				}
				return
			}
		}
	}()
	return func() {
		cancel()
		<-ended
	}
}
