package admin_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// The cost of one page of 50 out of 100,000 bans in memory, as the
// dashboard asks for it: its time and what it allocates (-benchmem).
func BenchmarkBansPage(b *testing.B) {
	p, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	ctx := context.Background()
	for i := range 100000 {
		if _, err := p.Ban(ctx, fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), protect.BanOptions{For: time.Duration(i%977+1) * time.Minute, Reason: "bulk"}); err != nil {
			b.Fatal(err)
		}
	}
	h := admin.Handler(p)
	for _, q := range []string{"limit=50", "limit=50&sort=key", "limit=50&sort=-key&offset=99950", "limit=50&q=10.1.", "limit=50&covers=10.1.2.3"} {
		b.Run(q, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/bans?"+q, nil))
				if w.Code != 200 {
					b.Fatalf("GET /v1/bans?%s = %d, want 200", q, w.Code)
				}
			}
		})
	}
}

// Records of many bans each keep their own end, however many share the
// arrays the ends are taken from.
func TestRecordsKeepTheirEnds(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var bans []protect.Ban
	for i := range 300 {
		bans = append(bans, protect.Ban{Reason: fmt.Sprint(i), Created: now, Expires: now.Add(time.Duration(i+1) * time.Second)})
	}
	for i, r := range admin.Records(bans, now) {
		if r.Expires == nil || !r.Expires.Equal(now.Add(time.Duration(i+1)*time.Second)) || r.SecondsLeft == nil || *r.SecondsLeft != int64(i+1) {
			t.Fatalf("Records(bans)[%d] = Expires %v, SecondsLeft %v; want %v, %d", i, r.Expires, r.SecondsLeft, now.Add(time.Duration(i+1)*time.Second), i+1)
		}
	}
	// The records, and one array each of the ends: not two allocations a
	// record (these bans' zero keys read as "" without one).
	if n := testing.AllocsPerRun(10, func() { admin.Records(bans, now) }); n != 3 {
		t.Errorf("Records of %d bans: %v allocations, want 3", len(bans), n)
	}
}
