package protect

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/httpprotect/protect/challenge"
	"github.com/httpprotect/protect/internal/needs"
)

// TestChallengeBrowser has Debian's chromium solve the page at the
// default difficulty, ten times, and logs the median solve time (from
// navigation to the original URL served): the figure of
// docs/challenge.md. Run it with
//
//	go test -run TestChallengeBrowser -v .
func TestChallengeBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	bin := needs.Binary(t, "chromium", "apt-get install chromium; .ci/parts/70-chromium.sh")
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

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil { // starts the browser, on a context with no timeout
		t.Fatalf("starting chromium: %v", err)
	}
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	clearCookies := chromedp.Action[chromedp.Void](func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, t, network.ClearBrowserCookies, cdp.Empty{})
		return chromedp.Void{}, err
	})
	// Past the threshold: the first request is the only one allowed.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/original?n=warm")); err != nil {
		t.Fatalf("chromium: %v", err)
	}

	const solves = 10
	var took []time.Duration
	for i := range solves {
		want := fmt.Sprintf("%s/original?n=%d", srv.URL, i)
		before, challenged := served.Load(), p.Stats().Decisions[Challenged]
		if err := chromedp.Do(ctx, clearCookies); err != nil {
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
	var cookies []*network.Cookie
	for i := range 3 {
		if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/original?n=again%d", srv.URL, i))); err != nil {
			t.Fatal(err)
		}
		if landed, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#landed"))); err != nil || landed != fmt.Sprintf("again%d", i) {
			t.Fatalf("with the pass: %q, %v", landed, err)
		}
	}
	res, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{})
	})
	if err != nil {
		t.Fatal(err)
	}
	cookies = res.Cookies
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
