// Package browsertest starts Debian's headless Chromium for a test,
// through chromedp: the challenge page is solved by a real browser's
// script, as a visitor's browser solves it.
package browsertest

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/httpprotect/protect/internal/needs"
)

// Start starts chromium (skipping, or failing under CI, without it),
// stopped in t.Cleanup, and returns a context for chromedp.Run and
// chromedp.Do of its one tab that ends after timeout.
func Start(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("drives a browser")
	}
	bin := needs.Binary(t, "chromium", "apt-get install chromium; .ci/parts/70-chromium.sh")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, on a context with no timeout
		t.Fatalf("starting chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancel)
	return ctx
}

// ClearCookies forgets every cookie of the browser.
var ClearCookies = chromedp.Action[chromedp.Void](func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
	_, err := cdp.Call(ctx, t, network.ClearBrowserCookies, cdp.Empty{})
	return chromedp.Void{}, err
})

// Cookies returns the browser's cookies.
func Cookies(ctx context.Context) ([]*network.Cookie, error) {
	res, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{})
	})
	return res.Cookies, err
}
