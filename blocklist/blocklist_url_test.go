package blocklist

import "testing"

// TestShownURL: a list's URL never shows its password or its query in a
// log line, an error or check's source.
func TestShownURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"https://lists.example/drop.txt", "https://lists.example/drop.txt"},
		{"https://me:s3cret@lists.example/drop.txt", "https://me:xxxxx@lists.example/drop.txt"},
		{"https://lists.example/drop.txt?key=s3cret#x", "https://lists.example/drop.txt?…"},
		{"https://lists.example/%zz", "(a URL that does not parse)"},
	}
	for _, tt := range tests {
		if got := shownURL(tt.in); got != tt.want {
			t.Errorf("shownURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
