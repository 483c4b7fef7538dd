package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/httpprotect/protect/challenge"
	"github.com/httpprotect/protect/internal/crowdsectest"
)

// verifyAs asks the daemon about a client behind the loopback proxy and
// returns the status and problem code.
func verifyAs(t *testing.T, d *daemon, client string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+d.addr+"/verify", nil)
	req.Header.Set("X-Forwarded-For", client)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Code string }
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &body)
	if resp.StatusCode == 403 && resp.Header.Get("Retry-After") != "" {
		t.Errorf("a blocked answer has Retry-After %q, want none", resp.Header.Get("Retry-After"))
	}
	return resp.StatusCode, body.Code
}

// eventually asks until client gets want, for at most two poll
// intervals (one poll, and the time cscli took to return).
func eventually(t *testing.T, d *daemon, client string, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(2500 * time.Millisecond)
	for {
		got, code := verifyAs(t, d, client)
		if got == want && (want != 403 || code == "blocked") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /verify for %s = %d %q after a poll, want %d", what, client, got, code, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func metric(t *testing.T, d *daemon, line string) bool {
	t.Helper()
	resp, err := http.Get("http://" + d.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.Contains(string(b), line)
}

// protectd with HTTP_PROTECT_CROWDSEC_URL enforces a real LAPI's
// decisions within a poll, lifts them within a poll of cscli decisions
// delete, and keeps them while the LAPI is down; its file list blocks
// beside them.
func TestCrowdsecEndToEnd(t *testing.T) {
	l := crowdsectest.Start(t)
	list := filepath.Join(t.TempDir(), "mine.txt")
	if err := os.WriteFile(list, []byte("203.0.113.0/24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1",
		envCrowdsecURL+"="+l.URL, envCrowdsecKey+"="+l.Bouncer(t), envCrowdsecInterval+"=1s",
		"HTTP_PROTECT_BLOCKLISTS="+list)
	if got, code := verifyAs(t, d, "203.0.113.5"); got != 403 || code != "blocked" {
		t.Errorf("/verify for 203.0.113.5 of the file list = %d %q, want 403 blocked", got, code)
	}
	eventually(t, d, "192.0.2.88", 200, "before any decision")

	l.Cscli(t, "decisions", "add", "--ip", "192.0.2.88", "--duration", "1h")
	l.Cscli(t, "decisions", "add", "--range", "198.51.100.0/24", "--duration", "1h")
	eventually(t, d, "192.0.2.88", 403, "cscli decisions add --ip")
	eventually(t, d, "198.51.100.200", 403, "cscli decisions add --range")
	found := false
	for _, l := range d.log.lines(t, "refused") {
		if l["decision"] == "blocked" && l["list"] == "crowdsec" && l["entry"] == "198.51.100.0/24" && l["code"] == "blocked" {
			found = true
		}
	}
	if !found {
		t.Errorf("no refused line names the list crowdsec and the entry 198.51.100.0/24; log:\n%s", d.log)
	}

	l.Cscli(t, "decisions", "delete", "--ip", "192.0.2.88")
	eventually(t, d, "192.0.2.88", 200, "cscli decisions delete --ip")

	l.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for !metric(t, d, `protect_blocklist_up{list="crowdsec",namespace="protect:"} 0`) {
		if time.Now().After(deadline) {
			t.Fatal("protect_blocklist_up{list=\"crowdsec\"} is not 0 with the LAPI stopped")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got, code := verifyAs(t, d, "198.51.100.200"); got != 403 || code != "blocked" {
		t.Errorf("/verify for 198.51.100.200 with the LAPI down = %d %q, want 403 blocked: the last set stays", got, code)
	}
	if n := len(d.log.lines(t, "protect/crowdsec: LAPI down; the last decisions stay in force")); n != 1 {
		t.Errorf("the outage was logged %d times, want 1", n)
	}
}

func TestCrowdsecSettings(t *testing.T) {
	csList := filepath.Join(t.TempDir(), "crowdsec.txt")
	tests := []struct {
		env  []string
		want string
	}{
		{[]string{envCrowdsecURL + "=http://127.0.0.1:8080"}, "HTTP_PROTECT_CROWDSEC_URL and HTTP_PROTECT_CROWDSEC_KEY: set both"},
		{[]string{envCrowdsecKey + "=secret"}, "HTTP_PROTECT_CROWDSEC_URL and HTTP_PROTECT_CROWDSEC_KEY: set both"},
		{[]string{envCrowdsecURL + "=127.0.0.1:8080", envCrowdsecKey + "=secret"}, `HTTP_PROTECT_CROWDSEC_URL="127.0.0.1:8080"`},
		{[]string{envCrowdsecURL + "=http://127.0.0.1:8080", envCrowdsecKey + "=secret", envCrowdsecInterval + "=500ms"}, `HTTP_PROTECT_CROWDSEC_INTERVAL="500ms": crowdsec: Interval 500ms: want at least 1s`},
		{[]string{envCrowdsecInterval + "=5s"}, "set HTTP_PROTECT_CROWDSEC_URL and HTTP_PROTECT_CROWDSEC_KEY too"},
		{[]string{envCrowdsecURL + "=http://127.0.0.1:8080", envCrowdsecKey + "=secret", "HTTP_PROTECT_BLOCKLISTS=" + csList}, fmt.Sprintf(`HTTP_PROTECT_BLOCKLISTS=%q: a list named "crowdsec", the name HTTP_PROTECT_CROWDSEC_URL's decisions take; name the file otherwise with NAME=PATH`, shorten(csList))},
		{[]string{envCrowdsecURL + "=http://127.0.0.1:8080", envCrowdsecKey + "=secret", envCrowdsecInterval + "=-5"}, `HTTP_PROTECT_CROWDSEC_INTERVAL="-5": want a duration such as 90s, 15m, 2d12h, or a bare number of seconds`},
		{[]string{envCrowdsecURL + "=http://127.0.0.1:8080", envCrowdsecKey + "=secret", envCrowdsecInterval + "=10x"}, `HTTP_PROTECT_CROWDSEC_INTERVAL="10x": want a duration such as 90s, 15m, 2d12h, or a bare number of seconds`},
	}
	for _, tt := range tests {
		_, err := loadSettings(append(tt.env, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1"))
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("loadSettings(%q) = %v, want an error with %q and no key", tt.env, err, tt.want)
		}
	}
	// The interval takes the environment's one duration syntax: a bare
	// number is seconds, and days count.
	for v, want := range map[string]time.Duration{"15": 15 * time.Second, "1.5": 1500 * time.Millisecond, "2m": 2 * time.Minute, "1d": 24 * time.Hour} {
		s, err := loadSettings([]string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", envCrowdsecURL + "=http://127.0.0.1:8080", envCrowdsecKey + "=secret", envCrowdsecInterval + "=" + v})
		if err != nil || s.crowdsec == nil || s.crowdsec.Interval != want {
			t.Errorf("loadSettings(%s=%s) = %+v, %v; want an interval of %v", envCrowdsecInterval, v, s.crowdsec, err, want)
		}
	}
}

// SIGHUP reads a rewritten list file at once, long before its Refresh.
func TestHangupReloadsBlockLists(t *testing.T) {
	list := filepath.Join(t.TempDir(), "mine.txt")
	if err := os.WriteFile(list, []byte("203.0.113.0/24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_BLOCKLISTS="+list)
	if got, _ := verifyAs(t, d, "192.0.2.99"); got != 200 {
		t.Fatalf("/verify for 192.0.2.99 = %d, want 200", got)
	}
	if err := os.WriteFile(list, []byte("192.0.2.99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mt := time.Now().Add(time.Minute)
	os.Chtimes(list, mt, mt)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, d, "192.0.2.99", 403, "SIGHUP after a rewrite")
	if n := len(d.log.lines(t, "SIGHUP: block lists checked")); n != 1 {
		t.Errorf("%d lines say the lists were checked, want 1", n)
	}
}

// A real LAPI's captcha decision gives the challenge page, not 403
// Blocked, under protectd with the challenge on; a ban decision beside
// it still blocks; the client served the page is served with the pass
// it buys. Without the challenge, captcha decisions are not enforced.
func TestCrowdsecCaptcha(t *testing.T) {
	l := crowdsectest.Start(t)
	cs := func() []string { // a bouncer of its own: the LAPI keeps each one's place in the stream
		return []string{envCrowdsecURL + "=" + l.URL, envCrowdsecKey + "=" + l.Bouncer(t), envCrowdsecInterval + "=1s"}
	}
	d := startDaemon(t, append([]string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=1000",
		"HTTP_PROTECT_CHALLENGE_SECRET=0123456789abcdef", "HTTP_PROTECT_CHALLENGE_DIFFICULTY=4"}, cs()...)...)
	plain := startDaemon(t, append([]string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1"}, cs()...)...)
	l.Cscli(t, "decisions", "add", "--ip", "192.0.2.77", "--type", "captcha", "--duration", "1h")
	l.Cscli(t, "decisions", "add", "--ip", "192.0.2.78", "--duration", "1h")
	eventually(t, d, "192.0.2.78", 403, "cscli decisions add --ip (ban)")

	verify := "http://" + d.addr + "/verify"
	a := get(t, http.DefaultClient, verify, "X-Forwarded-For", "192.0.2.77", "X-Forwarded-Uri", "/p")
	if a.header.Get(hdrCode) != "challenged" {
		t.Fatalf("/verify for 192.0.2.77 of a captcha decision = %d %s %q, want the page", a.code, a.header.Get(hdrCode), a.body)
	}
	nonce := challengePage(t, "/verify for 192.0.2.77", a, "/p")
	found := false
	for _, line := range d.log.lines(t, "refused") {
		if line["code"] == "challenged" && line["list"] == "crowdsec-captcha" && line["entry"] == "192.0.2.77" {
			found = true
		}
	}
	if !found {
		t.Errorf("no refused line names the list crowdsec-captcha and the entry 192.0.2.77; log:\n%s", d.log)
	}

	a = postAnswer(t, noJSClient("127.0.0.1"), "http://"+d.addr, nonce, challenge.Solve(nonce, 4), "/p", "X-Forwarded-For", "192.0.2.77")
	pass := passOf(a)
	if pass == nil || a.code != http.StatusSeeOther {
		t.Fatalf("POST the answer for 192.0.2.77 = %d %q, want 303 and the pass", a.code, a.header.Values("Set-Cookie"))
	}
	if a := get(t, http.DefaultClient, verify, "X-Forwarded-For", "192.0.2.77", "Cookie", pass.Name+"="+pass.Value); a.code != 200 {
		t.Fatalf("/verify for 192.0.2.77 with the pass = %d %q, want 200", a.code, a.body)
	}

	eventually(t, plain, "192.0.2.78", 403, "cscli decisions add --ip (ban), without the challenge")
	if got, code := verifyAs(t, plain, "192.0.2.77"); got != 200 {
		t.Fatalf("/verify for 192.0.2.77 of a captcha decision without the challenge = %d %q, want 200", got, code)
	}

	// Too wide a set of captcha decisions: refused by the protectd that
	// challenges, ignored, as every captcha decision, by the one that
	// does not. The ban after it shows both have read it.
	l.Cscli(t, "decisions", "add", "--range", "0.0.0.0/1", "--type", "captcha", "--duration", "1h")
	l.Cscli(t, "decisions", "add", "--ip", "192.0.2.79", "--duration", "1h")
	eventually(t, d, "192.0.2.79", 403, "cscli decisions add --ip (ban), after a wide captcha range")
	eventually(t, plain, "192.0.2.79", 403, "cscli decisions add --ip (ban), after a wide captcha range, without the challenge")
	if lines := plain.log.lines(t, "protect/crowdsec: decisions refused; the last set stays in force"); len(lines) != 0 {
		t.Errorf("protectd without the challenge refused captcha decisions it ignores: %v", lines)
	}
	if lines := d.log.lines(t, "protect/crowdsec: decisions refused; the last set stays in force"); len(lines) != 1 || lines[0]["list"] != "crowdsec-captcha" {
		t.Errorf("protectd with the challenge logged %v, want one refusal of the list crowdsec-captcha", lines)
	}
}
