package main

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// FuzzVerify: whatever a peer sends, /verify answers 200, or refuses with
// a status it also reports in X-Protect-Status, and never panics.
func FuzzVerify(f *testing.F) {
	f.Add("10.0.0.1:5555", "203.0.113.7", "acme", "pro", "403", "/verify")
	f.Add("10.0.0.1:5555", "6.6.6.6, garbage", "", "", "", "/verify//x/../y")
	f.Add("9.9.9.9:1", "203.0.113.7", "acme", "gold", "401", "/verify/")
	f.Add("[::ffff:10.0.0.1]:1", "[2001:db8::1]:443", "~00", "pro", "999", "/verify?a=b")
	h, _ := testVerifier(f, trusted, plans, "HTTP_PROTECT_MAX_REQUESTS=3", "HTTP_PROTECT_BAN_LIMIT=6")
	f.Fuzz(func(t *testing.T, peer, xff, consumer, plan, refusal, path string) {
		rest, ok := strings.CutPrefix(path, "/verify")
		if !ok || (rest != "" && rest[0] != '/' && rest[0] != '?') || strings.ContainsAny(path, " \r\n#") {
			return // not /verify: other routes answer otherwise
		}
		if _, err := url.ParseRequestURI(path); err != nil {
			return // no HTTP server would hand it to a handler
		}
		w := ask(h, "GET", "http://protectd"+path, peer,
			"X-Forwarded-For", xff, hdrConsumer, consumer, hdrPlan, plan, hdrRefusalStatus, refusal)
		status, err := strconv.Atoi(w.Header().Get(hdrStatus))
		if err != nil {
			t.Fatalf("GET %s from %s = %d without a numeric %s (%v), want one", path, peer, w.Code, hdrStatus, w.Header())
		}
		switch {
		case w.Code == 200:
			if status != 200 {
				t.Fatalf("GET %s from %s = 200, %s %d; want %s 200", path, peer, hdrStatus, status, hdrStatus)
			}
		case w.Code == 401 || w.Code == 403:
			if status < 400 || w.Header().Get(hdrCode) == "" {
				t.Fatalf("GET %s from %s = %d, %s %d, %s %q; want %s at least 400 and a %s", path, peer, w.Code, hdrStatus, status, hdrCode, w.Header().Get(hdrCode), hdrStatus, hdrCode)
			}
		case w.Code != status || status < 400:
			t.Fatalf("GET %s from %s = %d, %s %d; want the two equal, at least 400", path, peer, w.Code, hdrStatus, status)
		}
	})
}

// FuzzSettings: any value of protectd's own settings is read or refused
// with an error that quotes the setting.
func FuzzSettings(f *testing.F) {
	f.Add("127.0.0.1:8089", `{"pro": {"rates": [{"limit": 1, "period": "1s"}]}}`)
	f.Add(":0", `{"x": {"quotas": [{"limit": 1, "period": "monthly"}]}}`)
	f.Add("[::1]:http", `{"a":{}}`)
	f.Add("unix:/run/protectd.sock", `{"a":{}}`)
	f.Add("unix:protectd.sock", `{"a":{}}`)
	f.Fuzz(func(t *testing.T, listen, plans string) {
		if strings.ContainsAny(listen+plans, "\x00") || !strings.HasPrefix(strings.TrimSpace(plans), "{") {
			return // a value that is not inline JSON names a file
		}
		_, err := loadSettings([]string{envListen + "=" + listen, envPlans + "=" + plans})
		if err != nil && !strings.Contains(err.Error(), "HTTP_PROTECT_") {
			t.Fatalf("loadSettings(%s=%q, %s=%q) = %v, want an error naming its HTTP_PROTECT_ setting", envListen, listen, envPlans, plans, err)
		}
	})
}
