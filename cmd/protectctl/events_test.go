package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// eventLines decodes protectctl events -json: one record a line.
func eventLines(t *testing.T, out string) []admin.EventRecord {
	t.Helper()
	var recs []admin.EventRecord
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var r admin.EventRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("events -json line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

func eventSummary(recs []admin.EventRecord) string {
	var s []string
	for _, r := range recs {
		s = append(s, r.Kind+" "+r.Key)
	}
	return strings.Join(s, ", ")
}

// protectctl events prints the journal through the admin API: all of it,
// the last while of it (-since), or what came after a cursor (-after).
func TestEvents(t *testing.T) {
	clk := &fakeClock{t: time.Now().Add(-2 * time.Hour)}
	ms := newMemService(t, clk.Now, protect.Config{})
	p, ctx := ms.ps[0], t.Context()
	if _, err := p.Ban(ctx, "198.51.100.7", protect.BanOptions{For: 24 * time.Hour, Reason: "old", By: "ops"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Hour)
	if _, err := p.Ban(ctx, "203.0.113.0/24", protect.BanOptions{Reason: "scan\x1b[31m", By: "ops"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Lift(ctx, "198.51.100.7", "ops"); err != nil {
		t.Fatal(err)
	}

	code, out, errs := ctlServer(t, ms.url, "events", "-json")
	all := eventLines(t, out)
	if want := "ban 198.51.100.7, ban 203.0.113.0/24, lift 198.51.100.7"; code != 0 || eventSummary(all) != want {
		t.Fatalf("events -json = exit %d, %q (stderr %q); want 0, %q", code, eventSummary(all), errs, want)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-since", "1h"}, "ban 203.0.113.0/24, lift 198.51.100.7"},
		{[]string{"-after", all[1].Cursor}, "lift 198.51.100.7"},
		{[]string{"-after", all[2].Cursor}, ""},
	}
	for _, tt := range tests {
		code, out, errs := ctlServer(t, ms.url, append([]string{"events", "-json"}, tt.args...)...)
		if got := eventSummary(eventLines(t, out)); code != 0 || got != tt.want {
			t.Errorf("events -json %v = exit %d, %q (stderr %q); want 0, %q", tt.args, code, got, errs, tt.want)
		}
	}

	code, out, _ = ctlServer(t, ms.url, "events", "-since", "1h")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "TIME ") ||
		!strings.Contains(lines[1], " ban ") || !strings.Contains(lines[1], `scan\x1b[31m`) || !strings.Contains(lines[2], " lift ") {
		t.Fatalf("events -since 1h = exit %d,\n%s\nwant a header, the range ban (its reason escaped) and the lift", code, out)
	}

	for _, args := range [][]string{{"events", "-since", "-1h"}, {"events", "-after", "x1"}, {"events", "extra"}} {
		if code, _, errs := ctlServer(t, ms.url, args...); code != exitUsage {
			t.Errorf("protectctl %v = exit %d (stderr %q), want %d", args, code, errs, exitUsage)
		}
	}
}

// lineSink hands each line written to it to lines, and fails the write
// after the last one wanted, as a pipe does once its reader is gone.
type lineSink struct {
	lines chan string
	left  int
}

var errReaderGone = errors.New("reader gone")

func (s *lineSink) Write(b []byte) (int, error) {
	s.lines <- string(b)
	if s.left--; s.left == 0 {
		return 0, errReaderGone
	}
	return len(b), nil
}

// events -follow prints a ban made after it started.
func TestEventsFollow(t *testing.T) {
	ms := newMemService(t, time.Now, protect.Config{})
	p := ms.ps[0]
	if _, err := p.Ban(t.Context(), "198.51.100.7", protect.BanOptions{}); err != nil {
		t.Fatal(err)
	}
	sink := &lineSink{lines: make(chan string, 2), left: 2}
	done := make(chan int)
	var errb strings.Builder
	go func() {
		done <- run([]string{"-server", ms.url, "events", "-follow", "-json"}, sink, &errb)
	}()
	if got := eventSummary(eventLines(t, <-sink.lines)); got != "ban 198.51.100.7" {
		t.Fatalf("events -follow first line = %q, want ban 198.51.100.7", got)
	}
	if _, err := p.Ban(t.Context(), "203.0.113.9", protect.BanOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := eventSummary(eventLines(t, <-sink.lines)); got != "ban 203.0.113.9" {
		t.Fatalf("events -follow line after a later ban = %q, want ban 203.0.113.9", got)
	}
	if code := <-done; code != exitFailure || !strings.Contains(errb.String(), errReaderGone.Error()) {
		t.Fatalf("events -follow after its stdout failed = exit %d, stderr %q; want %d and the error", code, errb.String(), exitFailure)
	}
}
