package crowdsec

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"3h59m58.123s", 3*time.Hour + 59*time.Minute + 58123*time.Millisecond, true},
		{"59m58.384166521s", 59*time.Minute + 58384166521, true},
		{"-1.5s", -1500 * time.Millisecond, true},
		{"-21.741432ms", -21741432, true},
		{"1.5h", 90 * time.Minute, true},
		{"168h0m0s", 168 * time.Hour, true},
		{"7d", 7 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"0.5d", 12 * time.Hour, true},
		{" 4h ", 4 * time.Hour, true},
		{"", 0, false},
		{"forever", 0, false},
		{"d", 0, false},
		{"1d-5h", 0, false},
		{"99999999999999d", 0, false},
		{"NaNd", 0, false},
		{"-nand1h", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"3h59m58.123s", "-1.5s", "7d", "1d12h", "0.5d", "-21.741432ms"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil && d != 0 {
			t.Fatalf("ParseDuration(%q) = %v with error %v, want 0", s, d, err)
		}
	})
}
