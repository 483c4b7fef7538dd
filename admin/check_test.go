package admin_test

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// TestCheckNamesBlockListEntries: check reports each block list that
// holds an address, with the list, the entry and its note, after the
// bans; a safe network passes the address first; explain says blocked.
func TestCheckNamesBlockListEntries(t *testing.T) {
	dir := t.TempDir()
	mine, drop := filepath.Join(dir, "mine.txt"), filepath.Join(dir, "drop.txt")
	for name, data := range map[string]string{mine: "192.0.2.7\n198.51.100.0/24\n", drop: "198.51.100.0/24 ; SBL000001\n"} {
		if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := newProtector(protect.Config{
		SafeNetworks: []string{"198.51.100.128/25"},
		BlockLists: []protect.BlockList{
			{Name: "mine", Path: mine},
			{Name: "drop", Path: drop, Format: protect.FormatSpamhaus},
		},
	})
	t.Cleanup(func() { p.Close() })
	if _, err := p.Ban(t.Context(), "198.51.100.9", protect.BanOptions{For: time.Hour, Reason: "by hand"}); err != nil {
		t.Fatal(err)
	}
	a := admin.New(p)
	tests := []struct {
		addr    string
		refused bool
		safe    bool
		sources string // kind list entry reason, each
	}{
		{"192.0.2.7", true, false, `[block_list mine 192.0.2.7 ]`},
		{"198.51.100.9", true, false, `[ban protect: 198.51.100.9 by hand] [block_list mine 198.51.100.0/24 ] [block_list drop 198.51.100.0/24 SBL000001]`},
		{"198.51.100.200", false, true, `[block_list mine 198.51.100.0/24 ] [block_list drop 198.51.100.0/24 SBL000001]`},
		{"203.0.113.1", false, false, ``},
	}
	for _, tt := range tests {
		rep, err := a.Check(t.Context(), netip.MustParseAddr(tt.addr))
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, s := range rep.Sources {
			if got != "" {
				got += " "
			}
			got += "[" + s.Kind + " " + s.List + " " + s.Entry + " " + s.Reason + "]"
			if s.Kind == admin.SourceBlockList && (!s.Permanent || s.Expires != nil || s.Ban != nil) {
				b, _ := json.Marshal(s)
				t.Errorf("Check(%s) source %s, want permanent, no expiry, no ban", tt.addr, b)
			}
		}
		if rep.Refused != tt.refused || rep.Safe != tt.safe || got != tt.sources {
			t.Errorf("Check(%s) = refused %v safe %v sources %s; want refused %v safe %v sources %s", tt.addr, rep.Refused, rep.Safe, got, tt.refused, tt.safe, tt.sources)
		}
	}
	ex, err := a.Explain(t.Context(), "192.0.2.7:1234", nil)
	if err != nil || ex.Step != admin.StepBlocked || ex.Status != 403 {
		t.Fatalf("Explain(192.0.2.7) = step %q status %d, %v; want blocked 403", ex.Step, ex.Status, err)
	}
}
