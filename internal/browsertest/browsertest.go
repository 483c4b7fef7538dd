// Package browsertest starts Debian's headless chromium for the tests
// that drive a page through chromedp.
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

// Start starts headless chromium with a window of width×height and a
// profile of the test's own, stopped when the test ends, and returns the
// context of its first tab, which ends after timeout. Without chromium
// on PATH the test is Missing (skipped, or failed under CI).
func Start(t *testing.T, width, height int, timeout time.Duration) context.Context {
	t.Helper()
	bin := needs.Binary(t, "chromium", "apt-get install chromium; .ci/parts/70-chromium.sh")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("force-color-profile", "srgb"), chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(width, height),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, on a context with no timeout
		t.Fatalf("starting chromium: %v", err)
	}
	ctx, cancel = context.WithTimeout(ctx, timeout)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatalf("chromium: viewport %d×%d: %v", width, height, err)
	}
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
