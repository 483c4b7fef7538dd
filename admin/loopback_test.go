package admin

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/httpprotect/protect"
)

// A ban whose counted group or range holds a loopback address is
// refused, 400 bad_target naming the target, forced or not, and writes
// nothing; bans beside loopback are taken.
func TestBanRefusesLoopback(t *testing.T) {
	store := protect.NewMemoryStore(protect.MemoryOptions{})
	t.Cleanup(func() { store.Close() })
	p, err := protect.New(protect.Config{Store: store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv := httptest.NewServer(Handler(p))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		target string
		force  bool
		status int
		detail string // "" when taken
	}{
		{"::1.2.3.4", false, 400, `protect: bad target: "::1.2.3.4": a ban on ::/64 covers the loopback network ::1/128`},
		{"::1", false, 400, `protect: bad target: "::1": a ban on ::/64 covers the loopback network ::1/128`},
		{"::/96", false, 400, `protect: bad target: "::/96": a ban on ::/96 covers the loopback network ::1/128`},
		{"127.0.0.1", false, 400, `protect: bad target: "127.0.0.1": a ban on 127.0.0.1/32 covers the loopback network 127.0.0.0/8`},
		{"::ffff:127.0.0.9", false, 400, `protect: bad target: "::ffff:127.0.0.9": a ban on 127.0.0.9/32 covers the loopback network 127.0.0.0/8`},
		{"127.255.0.0/16", false, 400, `protect: bad target: "127.255.0.0/16": a ban on 127.255.0.0/16 covers the loopback network 127.0.0.0/8`},
		{"64.0.0.0/2", true, 400, `protect: bad target: "64.0.0.0/2": a ban on 64.0.0.0/2 covers the loopback network 127.0.0.0/8`},
		{"0.0.0.0/0", true, 400, `protect: bad target: "0.0.0.0/0": a ban on 0.0.0.0/0 covers the loopback network 127.0.0.0/8`},
		{"::/0", true, 400, `protect: bad target: "::/0": a ban on ::/0 covers the loopback network ::1/128`},
		{"128.0.0.0/1", true, 201, ""},
		{"126.255.255.255", false, 201, ""},
		{"128.0.0.1", false, 201, ""},
		{"::2:0:0:0:1", false, 201, ""},
		{"2001:db8::/32", false, 201, ""},
	} {
		body, _ := json.Marshal(BanRequest{Targets: []string{tc.target}, Force: tc.force})
		resp, err := http.Post(srv.URL+"/v1/bans", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var pr Problem
		if resp.StatusCode != http.StatusCreated {
			json.NewDecoder(resp.Body).Decode(&pr)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || pr.Detail != tc.detail || tc.detail != "" && pr.Code != CodeBadTarget {
			t.Errorf("POST /v1/bans %q (force %v) = %d %s %q, want %d %q", tc.target, tc.force, resp.StatusCode, pr.Code, pr.Detail, tc.status, tc.detail)
		}
	}
	bans, err := New(p).Bans(t.Context(), Filter{})
	if err != nil || len(bans) != 5 {
		t.Fatalf("Bans() = %d bans, %v; want the 5 taken", len(bans), err)
	}
}
