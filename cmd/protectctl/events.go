package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/envconfig"
)

// followPoll is how often events -follow asks for what is new.
const followPoll = time.Second

// eventsPage is how many events one call reads.
const eventsPage = 1000

// eventsCmd is "events [-follow] [-since DURATION] [-after CURSOR] [-json]".
func eventsCmd(fs *flag.FlagSet) func(*cli, []string) error {
	asJSON := fs.Bool("json", false, "write one JSON record per line")
	follow := fs.Bool("follow", false, "go on printing events as they happen, until interrupted")
	var since time.Duration
	fs.Var(durationSince{&since}, "since", "only events of this last while: 1h, 2d")
	after := fs.String("after", "", "only events after the one with this cursor")
	return func(c *cli, args []string) error {
		if len(args) > 0 {
			return usagef("events takes no arguments, got %q", args)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if !*follow {
			var cancel context.CancelFunc
			ctx, cancel = c.ctx()
			defer cancel()
		}
		var from time.Time
		if since > 0 {
			from = time.Now().Add(-since)
		}
		out := eventWriter{c: c, json: *asJSON}
		cursor := *after
		for {
			recs, err := c.svc.Events(ctx, cursor, eventsPage)
			if errors.Is(err, admin.ErrCursorGone) && *follow && cursor != "" {
				// Trimmed while followed: what was kept is newer than the
				// cursor, so reading from its start repeats nothing.
				fmt.Fprintln(c.stderr, "protectctl: the journal trimmed events before they were read; going on from the oldest it keeps")
				cursor = ""
				continue
			}
			if err != nil {
				if ctx.Err() != nil && *follow {
					return out.flush()
				}
				return err
			}
			for _, r := range recs {
				if !r.Time.Before(from) {
					if err := out.write(r); err != nil {
						return err
					}
				}
				cursor = r.Cursor
			}
			if len(recs) == eventsPage {
				continue
			}
			if err := out.flush(); err != nil || !*follow {
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(followPoll):
			}
		}
	}
}

// durationSince is -since: a length back from now, days allowed.
type durationSince struct{ d *time.Duration }

func (f durationSince) String() string {
	if f.d == nil || *f.d == 0 {
		return ""
	}
	return f.d.String()
}

func (f durationSince) Set(s string) error {
	d, err := envconfig.ParseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("%q: want a length back from now, such as 1h or 2d", s)
	}
	*f.d = d
	return nil
}

// eventWriter prints events as a table, flushed after each batch so
// that a followed journal shows at once, or as JSON lines.
type eventWriter struct {
	c    *cli
	json bool
	tw   *tabwriter.Writer
}

func (w *eventWriter) write(r admin.EventRecord) error {
	if w.json {
		return json.NewEncoder(w.c.stdout).Encode(r)
	}
	if w.tw == nil {
		w.tw = tabwriter.NewWriter(w.c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w.tw, "TIME\tEVENT\tTARGET\tSOURCE\tBY\tEXPIRES\tREASON")
	}
	expires := "never"
	if r.Expires != nil {
		expires = r.Expires.Format(time.RFC3339)
	}
	target := r.Key
	if r.Malformed != "" {
		target = "(damaged: " + r.Malformed + ")"
	}
	_, err := fmt.Fprintf(w.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.Format(time.RFC3339), r.Kind,
		cell(target), cell(r.Source), cell(r.By), expires, cell(r.Reason))
	return err
}

// flush ends a batch. A table keeps its column widths only within a
// batch: a followed journal's rows cannot wait for the widest to come.
func (w *eventWriter) flush() error {
	if w.tw == nil {
		return nil
	}
	return w.tw.Flush()
}
