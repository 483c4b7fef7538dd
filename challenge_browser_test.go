package protect

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/httpprotect/protect/challenge"
	"github.com/httpprotect/protect/internal/browsertest"
)

// TestChallengeBrowser has Debian's chromium solve the page at the
// default difficulty, ten times, and logs the median solve time (from
// navigation to the original URL served): the figure of
// docs/performance.md. Run it with
//
//	go test -run TestChallengeBrowser -v .
func TestChallengeBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	ctx := browsertest.Start(t, 1024, 768, 3*time.Minute)
	cc := ChallengeConfig{Secret: testSecret} // the default difficulty
	p, err := New(Config{MaxRequests: 1, BanLimit: 1 << 40, Challenge: &cc, Logger: discardLogger(),
		Skip: func(r *http.Request) bool { return r.URL.Path == "/favicon.ico" }}) // counted once per page otherwise
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var served atomic.Int64 // 200s of the original URL
	mux := http.NewServeMux()
	mux.HandleFunc("/original", func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		fmt.Fprintf(w, `<!doctype html><title>original</title><p id="landed">%s</p>`, r.URL.Query().Get("n"))
	})
	srv := httptest.NewServer(p.Middleware(mux))
	defer srv.Close()

	// Past the threshold: the first request is the only one allowed.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/original?n=warm")); err != nil {
		t.Fatalf("chromium: %v", err)
	}

	const solves = 10
	var took []time.Duration
	for i := range solves {
		want := fmt.Sprintf("%s/original?n=%d", srv.URL, i)
		before, challenged := served.Load(), p.Stats().Decisions[Challenged]
		if err := chromedp.Do(ctx, browsertest.ClearCookies); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := chromedp.Do(ctx, chromedp.Navigate(want), chromedp.WaitVisible(chromedp.CSS("#landed")))
		if err != nil {
			t.Fatalf("solve %d: %v", i, err)
		}
		took = append(took, time.Since(start))
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		landed, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#landed")))
		if loc != want || landed != fmt.Sprint(i) || served.Load() != before+1 || p.Stats().Decisions[Challenged] != challenged+1 {
			t.Fatalf("solve %d: at %q (%q), served %d, challenged %d; want %q served once after one challenge",
				i, loc, landed, served.Load()-before, p.Stats().Decisions[Challenged]-challenged, want)
		}
	}

	// With the pass, later requests are served without a challenge.
	challenged := p.Stats().Decisions[Challenged]
	for i := range 3 {
		if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/original?n=again%d", srv.URL, i))); err != nil {
			t.Fatal(err)
		}
		if landed, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#landed"))); err != nil || landed != fmt.Sprintf("again%d", i) {
			t.Fatalf("with the pass: %q, %v", landed, err)
		}
	}
	cookies, err := browsertest.Cookies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Stats().Decisions[Challenged]; got != challenged {
		t.Fatalf("challenged %d more times with a pass", got-challenged)
	}
	if len(cookies) != 1 || cookies[0].Name != challenge.CookieName || !cookies[0].HTTPOnly || cookies[0].SameSite != network.CookieSameSiteLax {
		t.Fatalf("cookies %+v", cookies)
	}
	slices.Sort(took)
	t.Logf("difficulty %d: median solve %v of %d (min %v, max %v), navigation to the original URL served",
		challenge.DefaultDifficulty, (took[solves/2-1]+took[solves/2])/2, solves, took[0], took[solves-1])
}
