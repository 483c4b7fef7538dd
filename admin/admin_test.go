package admin

import (
	"strings"
	"testing"
)

func TestParseHeader(t *testing.T) {
	tests := []struct{ in, name, value string }{
		{"X-Forwarded-For: 6.6.6.6, 1.2.3.4", "X-Forwarded-For", "6.6.6.6, 1.2.3.4"},
		{"Forwarded:for=1.2.3.4", "Forwarded", "for=1.2.3.4"},
		{"X-Real-IP:  [::1]:80 ", "X-Real-IP", "[::1]:80"},
	}
	for _, tt := range tests {
		name, value, err := ParseHeader(tt.in)
		if err != nil || name != tt.name || value != tt.value {
			t.Errorf("ParseHeader(%q) = %q, %q, %v; want %q, %q, nil", tt.in, name, value, err, tt.name, tt.value)
		}
	}
	for _, bad := range []string{"", "no colon", ": value"} {
		if _, _, err := ParseHeader(bad); err == nil {
			t.Errorf("ParseHeader(%q) = nil error, want an error", bad)
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{"X-Forwarded-For: 1.2.3.4", ":", "a:", "::::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, value, err := ParseHeader(s)
		if err != nil {
			return
		}
		if name == "" || strings.Contains(name, ":") || !strings.Contains(s, value) {
			t.Fatalf("ParseHeader(%q) = %q, %q; want a name without a colon and a value from the input", s, name, value)
		}
	})
}
