package admin_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/testclock"
)

// GET /v1/bans cuts the page that offset and limit name from the
// listing its filters select and sort, and counts them all in
// X-Total-Count.
func TestBansPage(t *testing.T) {
	clock := testclock.New()
	p, err := protect.New(protect.Config{Clock: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx := context.Background()
	for i, b := range []struct {
		target, reason string
		d              time.Duration
	}{
		{"203.0.113.1", "scanner", 3 * time.Hour},
		{"203.0.113.2", "Login failures", time.Hour},
		{"198.51.100.0/24", "scanner net", 2 * time.Hour},
		{"consumer:acme", "unpaid", 4 * time.Hour},
		{"2001:db8:1:2::99", "v6 client", 5 * time.Hour},
	} {
		if _, err := p.Ban(ctx, b.target, protect.BanOptions{For: b.d, Reason: b.reason}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Duration(i+1) * time.Second)
	}
	h := admin.Handler(p)
	for _, tc := range []struct {
		query, want string
		total       string
	}{
		{"", "203.0.113.2 198.51.100.0/24 203.0.113.1 acme 2001:db8:1:2::/64", "5"},
		{"limit=2", "203.0.113.2 198.51.100.0/24", "5"},
		{"limit=2&offset=2", "203.0.113.1 acme", "5"},
		{"offset=9", "", "5"},
		{"sort=key", "198.51.100.0/24 203.0.113.1 203.0.113.2 2001:db8:1:2::/64 acme", "5"},
		{"sort=key&q=.", "198.51.100.0/24 203.0.113.1 203.0.113.2", "3"},
		{"sort=-key&limit=1", "acme", "5"},
		{"sort=-expires", "2001:db8:1:2::/64 acme 203.0.113.1 198.51.100.0/24 203.0.113.2", "5"},
		{"sort=created", "203.0.113.1 203.0.113.2 198.51.100.0/24 acme 2001:db8:1:2::/64", "5"},
		{"sort=reason", "203.0.113.2 203.0.113.1 198.51.100.0/24 acme 2001:db8:1:2::/64", "5"},
		{"q=203.0.113", "203.0.113.2 203.0.113.1", "2"},
		{"q=ACME", "acme", "1"},
		{"q=consumer:acme", "acme", "1"},
		{"q=Consumer:AC", "acme", "1"},
		{"q=consumer:", "acme", "1"},
		{"q=consumer:203", "", "0"},
		{"q=2001:db8:", "2001:db8:1:2::/64", "1"},
		{"reason=SCANNER", "198.51.100.0/24 203.0.113.1", "2"},
		{"reason=scanner&limit=1&offset=1", "203.0.113.1", "2"},
		{"within=203.0.113.0/24&sort=-key", "203.0.113.2 203.0.113.1", "2"},
		{"covers=203.0.113.1", "203.0.113.1", "1"},
		{"covers=198.51.100.9", "198.51.100.0/24", "1"},
		{"covers=::ffff:198.51.100.9", "198.51.100.0/24", "1"},
		{"covers=2001:db8:1:2::99", "2001:db8:1:2::/64", "1"},
		{"covers=192.0.2.1", "", "0"},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/bans?"+tc.query, nil))
		var recs []admin.BanRecord
		if err := json.Unmarshal(w.Body.Bytes(), &recs); err != nil || w.Code != 200 {
			t.Fatalf("GET /v1/bans?%s = %d %s, want 200 and records", tc.query, w.Code, w.Body)
		}
		keys := make([]string, len(recs))
		for i, r := range recs {
			keys[i] = r.Key
		}
		if got := strings.Join(keys, " "); got != tc.want || w.Header().Get(admin.HeaderTotal) != tc.total {
			t.Errorf("GET /v1/bans?%s = %q, %s %q; want %q, %q", tc.query, got, admin.HeaderTotal, w.Header().Get(admin.HeaderTotal), tc.want, tc.total)
		}
	}
	for _, q := range []string{"sort=when", "offset=-1", "offset=x", "sort=--key", "covers=10.0.0.0/8", "covers=x"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/bans?"+q, nil))
		if w.Code != 400 || !strings.Contains(w.Body.String(), `"code":"bad_request"`) {
			t.Errorf("GET /v1/bans?%s = %d %s, want 400 bad_request", q, w.Code, w.Body)
		}
	}
}
