package envconfig

import (
	"strings"
	"testing"
	"time"
)

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"2d12h", "7d", "90s", "1d-1h", "99999999999999d", "d", "1.5h", "-3m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		// Whatever parses without days means what time.ParseDuration says.
		if !strings.Contains(s, "d") {
			if want, err := time.ParseDuration(s); err != nil || want != d {
				t.Fatalf("ParseDuration(%q) = %v, time.ParseDuration says %v, %v", s, d, want, err)
			}
		}
	})
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"2d12h": 60 * time.Hour, "7d": 7 * 24 * time.Hour, "90s": 90 * time.Second, "1d30m": 24*time.Hour + 30*time.Minute} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "2x", "1d-1h", "99999999999999d"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = nil error, want an error", in)
		}
	}
}
