// Package cmddoc turns a command's package doc comment into the manual
// that its -h flag prints, so that the manual is written once, in doc.go,
// and read the same by go doc and by -h.
package cmddoc

import "strings"

// Text returns the line comment that opens src, the text of a Go source
// file, without its comment markers: each line loses its "//" and the one
// space after it, so that the tab that starts a code block stays. Text
// stops at the first line that is not a line comment; src must therefore
// open with the comment, as a doc.go file does.
func Text(src string) string {
	var b strings.Builder
	for line := range strings.Lines(src) {
		line = strings.TrimRight(line, "\r\n")
		rest, ok := strings.CutPrefix(line, "//")
		if !ok {
			break
		}
		b.WriteString(strings.TrimPrefix(rest, " "))
		b.WriteByte('\n')
	}
	return b.String()
}
