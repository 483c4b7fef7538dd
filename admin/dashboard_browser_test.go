package admin_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
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
	// One key in both lists: two rows, each lifted alone.
	for _, p := range ps {
		if _, err := p.Ban(context.Background(), "203.0.113.7", protect.BanOptions{For: 2 * time.Hour, Reason: p.Config().BanNamespace + " list"}); err != nil {
			t.Fatal(err)
		}
	}
	do("the bans page", chromedp.Navigate(base+"/?b#bans"), chromedp.WaitVisible(chromedp.CSS(`#bans-table tr[data-key="203.0.113.2"]`)))
	keys, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#bans-table tbody tr")].map(r => r.dataset.key + " " + r.children[2].textContent + " " + r.dataset.list)`))
	slices.Sort(keys) // one expiry: the listing orders them by list
	want := []string{"203.0.113.1 web: list web:", "203.0.113.2 api: list api:", "203.0.113.7 api: list api:", "203.0.113.7 web: list web:"}
	if err != nil || !slices.Equal(keys, want) {
		t.Fatalf("bans page of two lists = %q, %v; want %q", keys, err, want)
	}
	do("lift 203.0.113.2", chromedp.Click(chromedp.CSS(`tr[data-key="203.0.113.2"] button[data-target]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#bans-table tr[data-key="203.0.113.2"]`)))
	do("lift 203.0.113.7 of api:", chromedp.Click(chromedp.CSS(`tr[data-key="203.0.113.7"][data-list="api:"] button[data-target]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#bans-table tr[data-key="203.0.113.7"][data-list="api:"]`)))
	for i, want := range [][]string{{"203.0.113.1", "203.0.113.7"}, {}} {
		bans, err := admin.New(ps[i]).Bans(context.Background(), admin.Filter{})
		var got []string
		for _, b := range bans {
			got = append(got, b.Key.String())
		}
		slices.Sort(got)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s bans after the lifts of the api: rows = %v, %v; want %v", ps[i].Config().BanNamespace, got, err, want)
		}
	}
	do("lift 203.0.113.7 of web: ticked", chromedp.Click(chromedp.CSS(`tr[data-key="203.0.113.7"][data-list="web:"] input.pick`)),
		chromedp.Click(chromedp.CSS("#lift-selected")),
		chromedp.WaitNotPresent(chromedp.CSS(`#bans-table tr[data-key="203.0.113.7"]`)))
	if bans, err := admin.New(ps[0]).Bans(context.Background(), admin.Filter{}); err != nil || len(bans) != 1 || bans[0].Key.String() != "203.0.113.1" {
		t.Fatalf("web: bans after lifting the ticked row = %v, %v; want 203.0.113.1 alone", bans, err)
	}
	// A partial IPv6 address is searched as text (covers= would be 400),
	// and a consumer's key as the table shows it finds it.
	for _, target := range []string{"2001:db8::5", "consumer:acme"} {
		if _, err := ps[0].Ban(context.Background(), target, protect.BanOptions{For: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ q, key string }{{"2001:db8:", "2001:db8::/64"}, {"consumer:acme", "acme"}} {
		do("search "+tc.q, chromedp.SetValue(chromedp.CSS("#bans-q"), tc.q), chromedp.Click(chromedp.CSS(`#ban-search button[type="submit"]`)))
		wait("the search of "+tc.q, `document.querySelectorAll("#bans-table tbody tr").length === 1 && document.querySelector('#bans-table tr[data-key="`+tc.key+`"]') !== null`)
	}
}

// A proxy that adds an Authorization: Bearer header of its own, not the
// admin token, makes every API call 401: the page reloads once, and the
// login form says why, rather than the dashboard reloading forever.
func TestDashboardBrowserForeignBearer(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	p, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv := httptest.NewServer(admin.Dashboard(admin.DashboardConfig{Token: dashToken, Logger: slog.New(slog.DiscardHandler)}, p))
	t.Cleanup(srv.Close)
	ctx := browsertest.Start(t, 1100, 660, 2*time.Minute)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.SetValue(chromedp.CSS("#token"), dashToken),
		chromedp.Click(chromedp.CSS("#login button")),
		chromedp.WaitVisible(chromedp.CSS("#page-now"))); err != nil {
		t.Fatalf("chromium: login: %v", err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer not-the-admin-token"}}); err != nil {
		t.Fatalf("chromium: the proxy's header: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#login-error"))); err != nil {
		t.Fatalf("chromium: the login form after the API's 401: %v", err)
	}
	msg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#login-error").textContent + " | reloaded " + sessionStorage.getItem("protect-dashboard-reloaded")`))
	if want := "wrong bearer token"; err != nil || !strings.Contains(msg, want) || !strings.HasSuffix(msg, "| reloaded 1") {
		t.Fatalf("after the proxy's header: the page says %q, %v; want the login form saying %q, reloaded once", msg, err, want)
	}
}
