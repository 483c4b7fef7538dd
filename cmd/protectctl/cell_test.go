package main

import (
	"errors"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/httpprotect/protect"
	"github.com/redis/go-redis/v9"
)

func TestCell(t *testing.T) {
	tests := []struct{ in, want string }{
		{"credential stuffing", "credential stuffing"},
		{"", ""},
		{"Zürich — 東京", "Zürich — 東京"},
		{"a\nb", `a\nb`},
		{"a\r\n203.0.113.9\tauto", `a\r\n203.0.113.9\tauto`},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"\x1b]0;owned\x07", `\x1b]0;owned\x07`},
		{"del\x7f", `del\x7f`},
		{"c1 \u009b31m", `c1 \u009b31m`},
		{"bidi \u202egnp.exe", `bidi \u202egnp.exe`},
		{"isolate \u2066x\u2069", `isolate \u2066x\u2069`},
		{"line\u2028sep", `line\u2028sep`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"truncated \xe6\x9d", `truncated \xe6\x9d`},
		{`C:\ban`, `C:\\ban`},
		{"real \ufffd stays", "real \ufffd stays"},
		{strings.Repeat("a", maxCell), strings.Repeat("a", maxCell)},
		{strings.Repeat("a", maxCell+1), strings.Repeat("a", maxCell-1) + "…"},
		{strings.Repeat("東", maxCell+1), strings.Repeat("東", maxCell-1) + "…"},
		{strings.Repeat("a", maxCell-2) + "\n", strings.Repeat("a", maxCell-2) + `\n`},
		{strings.Repeat("a", maxCell-2) + "\nb", strings.Repeat("a", maxCell-2) + "…"}, // never half an escape
	}
	for _, tt := range tests {
		if got := cell(tt.in); got != tt.want {
			t.Errorf("cell(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzCell: whatever goes in, what comes out is valid UTF-8 a terminal
// only shows, and it changes nothing that was printable already.
func FuzzCell(f *testing.F) {
	for _, s := range []string{"scanner", "a\nb", "\x1b[2J", "\u202e", "\xff", `\x1b`, "\u0085"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := cell(s)
		if !utf8.ValidString(got) {
			t.Fatalf("cell(%q) = %q, want valid UTF-8", s, got)
		}
		for _, r := range got {
			if hostile(r) {
				t.Fatalf("cell(%q) = %q, holding %U; want no rune a terminal acts on", s, got, r)
			}
		}
		if printable(s) && utf8.RuneCountInString(s) <= maxCell && got != s {
			t.Fatalf("cell(%q) = %q, want the printable text unchanged", s, got)
		}
		if n := utf8.RuneCountInString(got); n > maxCell {
			t.Fatalf("cell(%q) = %d characters, want at most %d", s, n, maxCell)
		}
	})
}

// A reason or author with newlines, escape sequences and bidirectional
// overrides cannot forge a row, a colour or a title in bans, inspect,
// explain or lift: each table keeps its rows, and no byte a terminal acts
// on reaches stdout. -json keeps the text.
func TestHostileReasons(t *testing.T) {
	const (
		reason = "spam\n203.0.113.99  auto  fake row\r\x1b[32mgreen\x1b[0m\u202eevil\u009b2J"
		by     = "eve\x1b]0;owned\x07\t\xff"
	)
	t.Setenv("HTTP_PROTECT_TRUSTED_PROXIES", "10.0.0.0/8")
	for name, mk := range servers(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			sv := newEnvService(t, s)
			for _, target := range []string{"203.0.113.7", "198.51.100.0/24"} {
				if _, err := sv.p.Ban(t.Context(), target, protect.BanOptions{Reason: reason, By: by}); err != nil {
					t.Fatal(err)
				}
			}
			tests := []struct {
				args []string
				rows int
			}{
				{[]string{"bans"}, 3},
				{[]string{"inspect", "198.51.100.7"}, 7},
				{[]string{"inspect", "203.0.113.7"}, 6},
				{[]string{"explain", "-remote", "10.0.0.1:1", "-H", "X-Forwarded-For: 198.51.100.7"}, 6},
				{[]string{"explain", "-remote", "10.0.0.1:1", "-H", "X-Forwarded-For: \x1b[31m"}, 3},
				{[]string{"lift", "203.0.113.7", "198.51.100.0/24"}, 3},
			}
			for _, tt := range tests {
				code, out, errs := ctl(t, s, tt.args...)
				if code != 0 {
					t.Fatalf("protectctl %q = exit %d: %s, want exit 0", tt.args, code, errs)
				}
				if rows := strings.Count(out, "\n"); rows != tt.rows {
					t.Errorf("protectctl %q = %d rows, want %d:\n%s", tt.args, rows, tt.rows, out)
				}
				for _, r := range strings.TrimSuffix(out, "\n") {
					if r != '\n' && hostile(r) || r == utf8.RuneError {
						t.Errorf("protectctl %q = stdout holding %U, want no rune a terminal acts on:\n%q", tt.args, r, out)
						break
					}
				}
				if strings.Contains(tt.args[0], "bans") && !strings.Contains(out, `spam\n203.0.113.99`) {
					t.Errorf("protectctl %q =\n%s\nwant the reason shown escaped, as %s", tt.args, out, `spam\n203.0.113.99`)
				}
			}
			if _, err := sv.p.Ban(t.Context(), "203.0.113.8", protect.BanOptions{Reason: reason, By: by}); err != nil {
				t.Fatal(err)
			}
			var recs []struct{ Reason, By string }
			ctlJSON(t, s, &recs, "bans")
			if len(recs) != 1 || recs[0].Reason != reason || recs[0].By != strings.ToValidUTF8(by, "\ufffd") {
				t.Fatalf("protectctl bans -json = %q, want one ban with the exact reason %q and author %q", recs, reason, strings.ToValidUTF8(by, "\ufffd"))
			}
		})
	}
}

// A long reason is cut in the table, which keeps its width, and kept
// whole by -json; a reason longer than protect.MaxReasonLen is refused
// where it enters, naming the cap.
func TestLongReasons(t *testing.T) {
	for name, mk := range servers(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			sv := newService(t, s, protect.Config{})
			long := strings.Repeat("r", protect.MaxReasonLen)
			if _, err := sv.p.Ban(t.Context(), "203.0.113.7", protect.BanOptions{Reason: long}); err != nil {
				t.Fatal(err)
			}
			// One written past protectctl, at the length the issue met.
			s.c.Set(t.Context(), s.ns+"{203.0.113.8}:b", "1|0|0|manual|ops|"+strings.Repeat("x", 10_000), 0)
			s.c.ZAdd(t.Context(), s.ns+"bans", redis.Z{Score: math.Inf(1), Member: "203.0.113.8"})
			code, out, errs := ctl(t, s, "bans")
			if code != 0 {
				t.Fatalf("protectctl bans = exit %d: %s", code, errs)
			}
			for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				if n := utf8.RuneCountInString(line); n > 250 {
					t.Fatalf("protectctl bans: a row of %d characters, want the reason cut:\n%s", n, line)
				}
			}
			var recs []struct{ Key, Reason string }
			ctlJSON(t, s, &recs, "bans")
			if len(recs) != 2 || len(recs[0].Reason)+len(recs[1].Reason) != protect.MaxReasonLen+10_000 {
				t.Fatalf("protectctl bans -json: %d bans, reasons not whole", len(recs))
			}
			code, _, errs = ctl(t, s, "ban", "-reason", long+"r", "203.0.113.9")
			if code != 2 || !strings.Contains(errs, "at most 1024") {
				t.Fatalf("protectctl ban -reason <1025 bytes> = exit %d: %s; want exit 2 naming the cap", code, errs)
			}
			if _, err := sv.p.Ban(t.Context(), "203.0.113.9", protect.BanOptions{Reason: long + "r"}); !errors.Is(err, protect.ErrReasonTooLong) {
				t.Fatalf("Ban with a reason of 1025 bytes = %v, want ErrReasonTooLong", err)
			}
		})
	}
}
