package blocklist

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestParseListSamples parses each committed sample: the good lines are
// loaded, and each hostile one is rejected alone, with its number.
func TestParseListSamples(t *testing.T) {
	tests := []struct {
		file     string
		format   Format
		minCount int
		entries  []string // prefix, or prefix=note
		bad      []int    // line numbers
		skipped  int
	}{
		{"plain.txt", FormatPlain, 0,
			[]string{"192.0.2.7/32", "198.51.100.0/24", "2001:db8:bad::/48", "203.0.113.0/25"},
			[]int{6, 7, 8, 9, 10, 12}, 0},
		{"firehol_level1.netset", FormatNetset, 0,
			[]string{"0.0.0.0/8", "1.10.16.0/20", "1.19.0.0/16", "223.254.0.0/16", "224.0.0.0/3", "5.188.10.0/23"},
			[]int{14}, 0},
		{"drop.txt", FormatSpamhaus, 0,
			[]string{"1.10.16.0/20=SBL256894", "1.19.0.0/16=SBL434604", "2.56.192.0/22=SBL459831", "5.134.128.0/19=SBL270738"},
			[]int{8, 9}, 0},
		{"drop.json", FormatSpamhaus, 0,
			[]string{"1.10.16.0/20=SBL256894", "1.19.0.0/16=SBL434604", "2001:db8:dead::/48=SBL999999", "5.134.128.0/19=SBL270738"},
			[]int{4, 5}, 0},
		{"ipsum.txt", FormatIPsum, 3,
			[]string{"185.224.128.17/32", "45.148.10.240/32", "80.94.95.115/32", "2001:db8::1/128"},
			[]int{12, 13, 14}, 1},
		{"ipsum.txt", FormatIPsum, 0,
			[]string{"185.224.128.17/32", "45.148.10.240/32", "80.94.95.115/32", "194.26.29.42/32", "2001:db8::1/128"},
			[]int{12, 13, 14}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+tt.format.String(), func(t *testing.T) {
			f, err := os.Open("testdata/blocklists/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := parseList(f, tt.format, tt.minCount)
			if err != nil {
				t.Fatalf("parseList: %v", err)
			}
			var entries []string
			for _, e := range got.entries() {
				s := e.Prefix.String()
				if e.Note != "" {
					s += "=" + e.Note
				}
				entries = append(entries, s)
			}
			if !slices.Equal(entries, tt.entries) {
				t.Errorf("entries = %q, want %q", entries, tt.entries)
			}
			var bad []int
			for _, b := range got.bad {
				bad = append(bad, b.Line)
				if !strings.HasPrefix(b.Error(), "line ") || len(b.Text) > 80 {
					t.Errorf("bad line %d reads %q", b.Line, b.Error())
				}
			}
			if !slices.Equal(bad, tt.bad) {
				t.Errorf("bad lines = %v (%v), want %v", bad, got.bad, tt.bad)
			}
			if got.skipped != tt.skipped {
				t.Errorf("skipped = %d, want %d", got.skipped, tt.skipped)
			}
		})
	}
}

func TestParseListReasons(t *testing.T) {
	tests := []struct{ line, want string }{
		{"10.0.0.1/8", "host bits set; did you mean 10.0.0.0/8?"},
		{"::ffff:1.2.3.4", "an IPv4-mapped IPv6 spelling; write the IPv4 address"},
		{"::ffff:1.2.3.0/120", "an IPv4-mapped IPv6 spelling; write the IPv4 address"},
		{"fe80::1%eth0", "a zone is not allowed"},
		{"1.2.3.4/33", "not an address or a CIDR"},
		{strings.Repeat("a", 5000), "longer than 4096 bytes"},
		{"0.0.0.0/0", "covers every address of its family"},
		{"::/0", "covers every address of its family"},
	}
	for _, tt := range tests {
		got, _ := parseList(strings.NewReader(tt.line+"\n192.0.2.1\n"), FormatPlain, 0)
		if len(got.bad) != 1 || got.bad[0].Err.Error() != tt.want || len(got.prefixes) != 1 {
			t.Errorf("parseList(%.20q) = %v, %d entries; want one bad line %q and the next line loaded", tt.line, got.bad, len(got.prefixes), tt.want)
		}
	}
}

// fuzzList checks what parseList makes of any input: every entry valid,
// masked and unmapped, bad lines in order, and nothing counted twice.
func fuzzList(f *testing.F, format Format, samples ...string) {
	for _, s := range samples {
		b, err := os.ReadFile("testdata/blocklists/" + s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseList(bytes.NewReader(data), format, 3)
		if err != nil {
			t.Fatalf("parseList: %v", err)
		}
		lines := bytes.Count(data, []byte("\n")) + 1
		if n := len(got.prefixes) + len(got.bad) + got.skipped; n > lines {
			t.Fatalf("%d entries, bad and skipped lines of %d lines", n, lines)
		}
		for _, e := range got.entries() {
			if p := e.Prefix; !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
				t.Fatalf("entry %v: not a masked, unmapped prefix", p)
			}
		}
		last := 0
		for _, b := range got.bad {
			if b.Line <= last || b.Line > lines || len(b.Text) > 80 {
				t.Fatalf("bad line %d after %d of %d, text %d bytes", b.Line, last, lines, len(b.Text))
			}
			last = b.Line
		}
		s := NewSet(got.entries())
		for _, e := range got.entries() {
			if !s.Contains(e.Prefix.Addr()) {
				t.Fatalf("the set of the entries does not hold %v", e.Prefix)
			}
		}
	})
}

func FuzzParsePlain(f *testing.F)    { fuzzList(f, FormatPlain, "plain.txt") }
func FuzzParseNetset(f *testing.F)   { fuzzList(f, FormatNetset, "firehol_level1.netset") }
func FuzzParseSpamhaus(f *testing.F) { fuzzList(f, FormatSpamhaus, "drop.txt", "drop.json") }
func FuzzParseIPsum(f *testing.F)    { fuzzList(f, FormatIPsum, "ipsum.txt") }
