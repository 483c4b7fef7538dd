package redact

import "testing"

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://hooks.example/x", "https://hooks.example/x"},
		{"https://user:hunter2@hooks.example/x", "https://user:xxxxx@hooks.example/x"},
		{"http://u:p w@h/", "http://xxxxx@h/"},
		{"http://u:pa%zz@h/", "http://xxxxx@h/"},
		{"no url at all", "no url at all"},
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
