package envconfig

import (
	"reflect"
	"strings"
	"testing"

	protect "github.com/httpprotect/protect"
)

func TestBlockListsFromEnv(t *testing.T) {
	c, err := Read([]string{
		"HTTP_PROTECT_BLOCKLIST_DIR=/var/lib/protect",
		"HTTP_PROTECT_BLOCKLISTS=spamhaus:/etc/protect/drop.txt, firehol=netset:https://iplists.firehol.org/files/firehol_level1.netset,ipsum:3:/var/lib/ipsum.txt,/etc/mine.list,https://example.com/lists/bad.txt?x=1,suspect=challenge:ipsum:1:/var/lib/ipsum1.txt,challenge:/etc/tor.txt",
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []protect.BlockList{
		{Name: "drop", Path: "/etc/protect/drop.txt", Format: protect.FormatSpamhaus},
		{Name: "firehol", URL: "https://iplists.firehol.org/files/firehol_level1.netset", Format: protect.FormatNetset, Cache: "/var/lib/protect/firehol.cache"},
		{Name: "ipsum", Path: "/var/lib/ipsum.txt", Format: protect.FormatIPsum, MinCount: 3},
		{Name: "mine", Path: "/etc/mine.list"},
		{Name: "bad", URL: "https://example.com/lists/bad.txt?x=1", Cache: "/var/lib/protect/bad.cache"},
		{Name: "suspect", Path: "/var/lib/ipsum1.txt", Format: protect.FormatIPsum, MinCount: 1, Challenge: true},
		{Name: "tor", Path: "/etc/tor.txt", Challenge: true},
	}
	if !reflect.DeepEqual(c.BlockLists, want) {
		t.Errorf("BlockLists = %+v,\nwant %+v", c.BlockLists, want)
	}
}

func TestBlockListsFromEnvErrors(t *testing.T) {
	tests := []struct{ v, want string }{
		{"firehol:/etc/x.netset", `HTTP_PROTECT_BLOCKLISTS="firehol:/etc/x.netset": entry "firehol:/etc/x.netset": format "firehol": want plain, netset, spamhaus or ipsum`},
		{"spamhaus:3:/etc/drop.txt", `entry "spamhaus:3:/etc/drop.txt": "3" after spamhaus: only ipsum takes a minimum count`},
		{"/a/drop.txt,spamhaus:/b/drop.json", `entry "spamhaus:/b/drop.json": a second list named "drop"; name one of them with NAME=`},
		{"spamhaus:", `entry "spamhaus:": no path or URL`},
		// Names protect.New would refuse are refused here, under the variable.
		{"my list=/etc/x.txt", `entry "my list=/etc/x.txt": name "my list": want 1 to 64 printable bytes, no spaces`},
		{"/etc/" + strings.Repeat("a", 65) + ".txt", `: want 1 to 64 printable bytes, no spaces; write NAME=`},
	}
	for _, tt := range tests {
		_, err := Read([]string{"HTTP_PROTECT_BLOCKLISTS=" + tt.v}, Options{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("HTTP_PROTECT_BLOCKLISTS=%q: %v, want an error with %q", tt.v, err, tt.want)
		}
	}
}

// FuzzBlockListEntry checks that any entry either parses into a list
// New would take the source of, or is an error: never a list with no
// name, or with both a path and a URL.
func FuzzBlockListEntry(f *testing.F) {
	for _, s := range []string{"spamhaus:/etc/drop.txt", "s=challenge:netset:/a.netset", "drop=netset:https://x/y.netset", "ipsum:3:/a/b.txt", "https://x", "a=b:c", "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, e string) {
		l, err := parseBlockListEntry(e)
		if err != nil {
			return
		}
		if l.Name == "" || (l.Path == "") == (l.URL == "") || l.MinCount < 0 {
			t.Fatalf("parseBlockListEntry(%q) = %+v, want a name and one source", e, l)
		}
	})
}
