package blocklist

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/blocktest"
)

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

// A list whose server trickles its answer without end is cut at its
// deadline (listTimeout; shortened here), and keeps its last good set.
func TestBlockListDeadline(t *testing.T) {
	srv := blocktest.NewServer(t, "192.0.2.1\n")
	bl, err := Open([]List{{Name: "slow", URL: srv.URL}}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bl.Close)
	if err := bl.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	own := bl.lists[0].own
	own.mu.Lock()
	own.timeout = 200 * time.Millisecond
	srv.Slow.Store(true)
	own.mu.Unlock()
	err = bl.Reload(t.Context())
	want := fmt.Sprintf(`protect: block list "slow" (%s): GET %s: context deadline exceeded`, srv.URL, srv.URL)
	if fmt.Sprint(err) != want {
		t.Errorf("Reload() of a list trickled without end = %v, want %s", err, want)
	}
	if st := bl.Stats()[0]; st.Entries != 1 || st.Errors != 1 || st.Up {
		t.Errorf("Stats()[0] = %+v, want 1 entry, 1 error, down", st)
	}
}
