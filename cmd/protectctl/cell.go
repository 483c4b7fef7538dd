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
// always means the byte was there. A cell longer than maxCell characters
// (escapes counted as they print) is cut, never inside an escape, and
// ends in "…": one long reason must not pad every row of a table to its
// width. -json writes the exact text.
func cell(s string) string {
	if len(s) <= maxCell && printable(s) {
		return s
	}
	// Each piece is one character of s as it prints; more than maxCell of
	// them say the cell is cut, so no more are made.
	var pieces []string
	width := 0
	for i := 0; i < len(s) && width <= maxCell; {
		r, n := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && n == 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case r == '\\':
			piece = `\\`
		case r == '\n':
			piece = `\n`
		case r == '\r':
			piece = `\r`
		case r == '\t':
			piece = `\t`
		case r < 0x80 && hostile(r):
			piece = fmt.Sprintf(`\x%02x`, r)
		case hostile(r):
			piece = fmt.Sprintf(`\u%04x`, r)
		default:
			piece = s[i : i+n]
		}
		pieces = append(pieces, piece)
		width += utf8.RuneCountInString(piece)
		i += n
	}
	if width <= maxCell {
		return strings.Join(pieces, "")
	}
	var b strings.Builder
	width = 0
	for _, piece := range pieces {
		w := utf8.RuneCountInString(piece)
		if width+w > maxCell-1 {
			break
		}
		b.WriteString(piece)
		width += w
	}
	b.WriteString("…")
	return b.String()
}

// maxCell is the most characters a table cell shows.
const maxCell = 80

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
