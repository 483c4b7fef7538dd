package admin_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/browsertest"
)

// A Go service mounts the dashboard under /admin/ over two protectors
// with ban lists of their own: chromium logs in, the events page follows both
// journals, the bans page lists both lists and lifts from one. (The
// test of every page on protectd and Redis is TestDashboardBrowser in
// cmd/protectctl.)
func TestDashboardBrowserTwoLists(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	store := protect.NewMemoryStore(protect.MemoryOptions{})
	t.Cleanup(func() { store.Close() })
	var ps []*protect.Protector
	for _, ns := range []string{"web:", "api:"} {
		p, err := protect.New(protect.Config{Store: store, Namespace: ns, BanNamespace: ns, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		ps = append(ps, p)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", admin.Dashboard(admin.DashboardConfig{Token: dashToken}, ps...)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	base := srv.URL + "/admin"
	ctx := browsertest.Start(t, 1100, 660, 2*time.Minute)
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("chromium: %s: %v", what, err)
		}
	}
	wait := func(what, predicate string) {
		t.Helper()
		do(what, chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
	}
	do("login",
		chromedp.Navigate(base+"/#events"),
		chromedp.SetValue(chromedp.CSS("#token"), dashToken),
		chromedp.Click(chromedp.CSS("#login button")),
		chromedp.WaitVisible(chromedp.CSS("#page-now")),
		chromedp.Navigate(base+"/#events"),
		chromedp.WaitVisible(chromedp.CSS("#page-events")))
	for i, p := range ps {
		if _, err := p.Ban(context.Background(), "203.0.113."+string(rune('1'+i)), protect.BanOptions{For: time.Hour, Reason: p.Config().BanNamespace + " list"}); err != nil {
			t.Fatal(err)
		}
	}
	wait("both journals", `["web:", "api:"].every(l => document.querySelector('#events-table tr[data-kind="ban"][data-list="' + l + '"]') !== null)`)
	do("the bans page", chromedp.Navigate(base+"/?b#bans"), chromedp.WaitVisible(chromedp.CSS(`#bans-table tr[data-key="203.0.113.2"]`)))
	keys, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#bans-table tbody tr")].map(r => r.dataset.key + " " + r.children[2].textContent)`))
	slices.Sort(keys) // one expiry: the listing orders them by list
	if err != nil || len(keys) != 2 || keys[0] != "203.0.113.1 web: list" || keys[1] != "203.0.113.2 api: list" {
		t.Fatalf("bans page of two lists = %q, %v; want 203.0.113.1 of web:, 203.0.113.2 of api:", keys, err)
	}
	do("lift 203.0.113.2", chromedp.Click(chromedp.CSS(`tr[data-key="203.0.113.2"] button[data-target]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#bans-table tr[data-key="203.0.113.2"]`)))
	if bans, err := admin.New(ps[1]).Bans(context.Background(), admin.Filter{}); err != nil || len(bans) != 0 {
		t.Fatalf("api: bans after the lift from the page = %v, %v; want none", bans, err)
	}
}
