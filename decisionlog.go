package protect

import (
	"fmt"
	"log/slog"
)

// MarshalText implements encoding.TextMarshaler: a Status encodes as its
// name ("limited"), in JSON and in every slog handler, not as a number.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler: it reads the names
// String returns, so that a Status read back from JSON is the one written.
func (s *Status) UnmarshalText(b []byte) error {
	for i, n := range statusNames {
		if string(b) == n {
			*s = Status(i)
			return nil
		}
	}
	return fmt.Errorf("protect: status %q: want one of %q", b, statusNames)
}

// LogValue implements slog.LogValuer: the status's name.
func (s Status) LogValue() slog.Value { return slog.StringValue(s.String()) }

// LogValue implements slog.LogValuer, so that
// logger.Info("refused", "decision", d) logs a group of the fields that
// say something: status always; addr and key when known; count, limit
// and remaining when counted; retry_after (a duration) when there is a
// wait; policy under a plan; ban_expires for a ban that ends; dry_run
// when set; error when Err holds one. Zero fields are left out.
func (d Decision) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 11)
	attrs = append(attrs, slog.String("status", d.Status.String()))
	if d.Addr.IsValid() {
		attrs = append(attrs, slog.String("addr", d.Addr.String()))
	}
	if !d.Key.IsZero() {
		attrs = append(attrs, slog.String("key", d.Key.String()))
	}
	if d.Limit > 0 {
		attrs = append(attrs, slog.Int64("count", d.Count), slog.Int64("limit", d.Limit), slog.Int64("remaining", d.Remaining))
	}
	if d.RetryAfter > 0 {
		attrs = append(attrs, slog.Duration("retry_after", d.RetryAfter))
	}
	if d.Policy != "" {
		attrs = append(attrs, slog.String("policy", d.Policy))
	}
	if d.Status == Banned && !d.BanExpires.IsZero() {
		attrs = append(attrs, slog.Time("ban_expires", d.BanExpires))
	}
	if d.DryRun {
		attrs = append(attrs, slog.Bool("dry_run", true))
	}
	if d.Err != nil {
		attrs = append(attrs, slog.String("error", d.Err.Error()))
	}
	return slog.GroupValue(attrs...)
}
