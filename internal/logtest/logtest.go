// Package logtest records what protect logs through slog, so that tests
// can check every line a decision, a ban or an outage writes.
package logtest

import (
	"context"
	"log/slog"
	"sync"
)

// A Recorder is a slog.Handler that keeps every record, its message as
// "msg", its level as "level" (INFO, WARN) and each attribute by key, as
// text. The zero Recorder is ready to
// use.
type Recorder struct {
	mu      sync.Mutex
	records []map[string]string
}

// Enabled implements slog.Handler: every level is kept.
func (h *Recorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (h *Recorder) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message, "level": r.Level.String()}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	h.mu.Lock()
	h.records = append(h.records, m)
	h.mu.Unlock()
	return nil
}

// WithAttrs implements slog.Handler; the attributes are not kept.
func (h *Recorder) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup implements slog.Handler; the group is not kept.
func (h *Recorder) WithGroup(string) slog.Handler { return h }

// Records returns the records kept so far.
func (h *Recorder) Records() []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]string(nil), h.records...)
}

// Count returns how many records kept so far have message msg.
func (h *Recorder) Count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r["msg"] == msg {
			n++
		}
	}
	return n
}
