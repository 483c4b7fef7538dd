package cmddoc

import "testing"

func TestText(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"// Cmd does things.\npackage main\n", "Cmd does things.\n"},
		{"// Cmd does things.\n//\n//\tcmd -x\n//\n// # Flags\npackage main\n// not the doc\n",
			"Cmd does things.\n\n\tcmd -x\n\n# Flags\n"},
		{"// Cmd.\r\n//  indented\r\npackage main\r\n", "Cmd.\n indented\n"},
		{"package main\n", ""},
	} {
		if got := Text(tt.src); got != tt.want {
			t.Errorf("Text(%q) = %q, want %q", tt.src, got, tt.want)
		}
	}
}
