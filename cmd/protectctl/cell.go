package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// cell makes s safe to print in protectctl's tables. Reasons and authors
// are text whoever bans chooses (through protectctl, a service's own admin
// page, or any client of the Redis), and keys, headers and plan windows
// come from the store or the command line: a newline in one would forge a
// row, an escape sequence would recolour the terminal, move the cursor or
// set its title, and a bidirectional override would show text in another
// order than it is stored. So every C0 and C1 control character and DEL,
// every bidirectional control, the line and paragraph separators, and
// each byte of invalid UTF-8 is written as a Go escape (\n, \x1b,
// \u202e, \xff); a backslash is doubled, so that an escape in a cell
// always means the byte was there. -json writes the exact text.
func cell(s string) string {
	if printable(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && hostile(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case hostile(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// printable reports whether cell may print s as it is: the common case,
// with no allocation.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || c == '\\' {
			return false
		}
		if c >= 0x80 {
			for _, r := range s[i:] {
				if r == utf8.RuneError || r == '\\' || hostile(r) {
					return false // RuneError may be real U+FFFD: cell writes it as it is
				}
			}
			return true
		}
	}
	return true
}

// hostile reports a rune a terminal acts on rather than shows.
func hostile(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || unicode.In(r, unicode.Zl, unicode.Zp)
}
