package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect/admin"
)

const adminToken = "0123456789abcdef0123456789abcdef"

// A TCP admin listener needs a token; a unix socket may go without; a bad
// address or a short token is refused. Each error names the variables.
func TestAdminSettings(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string // "" for no error
	}{
		{nil, ""},
		{[]string{envAdminListen + "=unix:/run/protectd/admin.sock"}, ""},
		{[]string{envAdminListen + "=127.0.0.1:8090", envAdminToken + "=" + adminToken}, ""},
		{[]string{envAdminListen + "=127.0.0.1:8090"}, `HTTP_PROTECT_ADMIN_LISTEN="127.0.0.1:8090" is a TCP address: set HTTP_PROTECT_ADMIN_TOKEN`},
		{[]string{envAdminListen + "=8090", envAdminToken + "=" + adminToken}, `HTTP_PROTECT_ADMIN_LISTEN="8090": want host:port`},
		{[]string{envAdminListen + "=unix:"}, `HTTP_PROTECT_ADMIN_LISTEN="unix:": want unix:/path/to/socket`},
		{[]string{envAdminListen + "=unix:admin.sock"}, `HTTP_PROTECT_ADMIN_LISTEN="unix:admin.sock": want an absolute path`},
		{[]string{envAdminListen + "=127.0.0.1:8090", envAdminToken + "=short"}, `HTTP_PROTECT_ADMIN_TOKEN: 5 characters: want at least 16`},
		{[]string{envAdminListen + "=127.0.0.1:8090", envAdminToken + "=" + strings.Repeat(" ", 16)}, `HTTP_PROTECT_ADMIN_TOKEN is set but blank (16 characters, all whitespace): set it to a secret token (openssl rand -hex 32) or unset it`},
		{[]string{envAdminListen + "=unix:/run/protectd/admin.sock", envAdminToken + "=\t \n \t \n \t \n \t \n \t \n \t \n"}, `HTTP_PROTECT_ADMIN_TOKEN is set but blank (23 characters, all whitespace): set it to a secret token (openssl rand -hex 32) or unset it`},
		{[]string{envAdminListen + "=unix:/run/protectd/admin.sock", envAdminToken + "="}, `HTTP_PROTECT_ADMIN_TOKEN is set but blank (empty): set it to a secret token (openssl rand -hex 32) or unset it`},
		{[]string{envAdminListen + "=127.0.0.1:8090", envAdminToken + "= " + adminToken + "\n"}, `HTTP_PROTECT_ADMIN_TOKEN has whitespace at its start or end, which no request can send: remove it`},
		{[]string{envAdminToken + "=   "}, `HTTP_PROTECT_ADMIN_TOKEN is set but blank (3 characters, all whitespace): set it to a secret token (openssl rand -hex 32) or unset it`},
		{[]string{envAdminListen + "=unix:/run/protectd/admin.sock", envAdminOrigins + "=https://admin.example.com, http://127.0.0.1:8090"}, ""},
		{[]string{envAdminOrigins + "= "}, `HTTP_PROTECT_ADMIN_ORIGINS is set but blank: name the dashboard's origins (https://admin.example.com) or unset it`},
		{[]string{envAdminOrigins + "=admin.example.com"}, `HTTP_PROTECT_ADMIN_ORIGINS: origin "admin.example.com": want scheme://host[:port]`},
		{[]string{envAdminOrigins + "=https://admin.example.com/admin/"}, `HTTP_PROTECT_ADMIN_ORIGINS: origin "https://admin.example.com/admin/": want scheme://host[:port]`},
		{[]string{envAdminOrigins + "=https://admin.example.com,ftp://x"}, `HTTP_PROTECT_ADMIN_ORIGINS: origin "ftp://x": want scheme://host[:port]`},
	} {
		a, err := loadAdminSettings(tc.env)
		if blank := strings.Contains(tc.want, "blank"); blank && (err == nil || err.Error() != tc.want) ||
			(tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("loadAdminSettings(%q) = %v, want %q", tc.env, err, tc.want)
		}
		if err == nil && slices.ContainsFunc(tc.env, func(kv string) bool { return strings.HasPrefix(kv, envAdminOrigins+"=") }) {
			if want := []string{"https://admin.example.com", "http://127.0.0.1:8090"}; !slices.Equal(a.origins, want) {
				t.Errorf("loadAdminSettings(%q).origins = %q, want %q", tc.env, a.origins, want)
			}
		}
	}
	// protectd itself refuses to start, exit 2, naming both variables.
	var stderr bytes.Buffer
	code := run(context.Background(), nil, []string{"HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", envListen + "=127.0.0.1:0", envAdminListen + "=127.0.0.1:0"}, io.Discard, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), envAdminListen) || !strings.Contains(stderr.String(), envAdminToken) {
		t.Fatalf("protectd with %s=127.0.0.1:0 and no token = exit %d, stderr %q; want exit 2 naming %s and %s", envAdminListen, code, stderr.String(), envAdminListen, envAdminToken)
	}
}

// adminAddr waits for the daemon's admin listener and returns its address.
func adminAddr(t *testing.T, d *daemon) string {
	t.Helper()
	// It listens just after the main listener, whose line startDaemon
	// waited for.
	lines := d.log.lines(t, "admin API listening")
	for deadline := time.Now().Add(5 * time.Second); len(lines) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		lines = d.log.lines(t, "admin API listening")
	}
	if len(lines) != 1 {
		t.Fatalf("log = %s\nwant one admin API listening line", d.log)
	}
	return lines[0]["addr"].(string)
}

// verifyFrom asks d's /verify for a client behind the loopback proxy.
func verifyFrom(t *testing.T, d *daemon, client string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+d.addr+"/verify", nil)
	req.Header.Set("X-Forwarded-For", client)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// adminDo sends one admin request with the Authorization header auth
// ("" for none) and returns the status and the body.
func adminDo(t *testing.T, c *http.Client, method, url, auth string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, body
}

// On TCP, a request without the token, or with a wrong one, is 401 with
// code unauthorized and changes nothing; with it, a lift holds on the
// next /verify.
func TestAdminListenerToken(t *testing.T) {
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=1", "HTTP_PROTECT_BAN_LIMIT=2",
		envAdminListen+"=127.0.0.1:0", envAdminToken+"="+adminToken)
	base := "http://" + adminAddr(t, d)
	for range 3 {
		verifyFrom(t, d, "203.0.113.7")
	}
	if code := verifyFrom(t, d, "203.0.113.7"); code != 403 {
		t.Fatalf("/verify for 203.0.113.7 past its ban limit = %d, want 403", code)
	}
	lift := base + "/v1/bans?target=203.0.113.7"
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + adminToken + "x", "Basic " + adminToken, adminToken} {
		for _, method := range []string{"DELETE", "GET"} {
			code, body := adminDo(t, http.DefaultClient, method, lift, auth)
			var p admin.Problem
			if code != 401 || json.Unmarshal(body, &p) != nil || p.Code != admin.CodeUnauthorized || p.Status != 401 {
				t.Errorf("%s %s with Authorization %q = %d %s, want 401 code unauthorized", method, lift, auth, code, body)
			}
		}
		if code := verifyFrom(t, d, "203.0.113.7"); code != 403 {
			t.Fatalf("/verify after a lift with Authorization %q = %d, want 403: nothing lifted", auth, code)
		}
	}
	code, body := adminDo(t, http.DefaultClient, "DELETE", lift, "Bearer "+adminToken)
	var lifted []admin.BanRecord
	if code != 200 || json.Unmarshal(body, &lifted) != nil || len(lifted) != 1 || lifted[0].Key != "203.0.113.7" || lifted[0].BanNamespace != "protect:" {
		t.Fatalf("DELETE %s with the token = %d %s, want 200 and the ban of 203.0.113.7 in protect:", lift, code, body)
	}
	if code := verifyFrom(t, d, "203.0.113.7"); code != 200 {
		t.Fatalf("/verify for 203.0.113.7 right after the lift = %d, want 200", code)
	}
	if code := d.stop(); code != exitOK {
		t.Fatalf("d.stop() = exit %d, want 0; log:\n%s", code, d.log)
	}
}

// A unix socket serves without a token, to whoever may open the socket
// file (mode 0600).
func TestAdminListenerUnix(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "admin.sock")
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", envAdminListen+"=unix:"+sock)
	if got := adminAddr(t, d); got != sock {
		t.Fatalf("admin API listening on %q, want %q", got, sock)
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	code, body := adminDo(t, c, "GET", "http://unix/v1/protectors", "")
	var recs []admin.ProtectorRecord
	if code != 200 || json.Unmarshal(body, &recs) != nil || len(recs) != 1 || recs[0].Namespace != "protect:" || !recs[0].Published || recs[0].Limits.MaxRequests != 200 {
		t.Fatalf("GET /v1/protectors on %s = %d %s, want 200 and protect: with its published limits", sock, code, body)
	}
}

// Whatever the two variables hold, loadAdminSettings either refuses them
// with an error naming one of them, or gives a setting that is off, a
// unix socket, or a TCP address with a token.
func FuzzAdminSettings(f *testing.F) {
	f.Add("127.0.0.1:8090", adminToken)
	f.Add("unix:/run/a.sock", "")
	f.Add("[::1]:0", "short")
	f.Add("unix:", "")
	f.Fuzz(func(t *testing.T, listen, token string) {
		a, err := loadAdminSettings([]string{envAdminListen + "=" + listen, envAdminToken + "=" + token})
		switch {
		case err != nil:
			if !strings.Contains(err.Error(), envAdminListen) && !strings.Contains(err.Error(), envAdminToken) {
				t.Fatalf("loadAdminSettings(%q, %q) = %v, want an error naming a variable", listen, token, err)
			}
		case a.listen == "", a.socket() != "":
		case a.token == "" || len(a.token) < minTokenLen:
			t.Fatalf("loadAdminSettings(%q, %q) = TCP %q without a token of %d characters", listen, token, a.listen, minTokenLen)
		}
	})
}

// The admin listener serves the dashboard at / (the login form, under
// the strict CSP), and /ui/now counts the keys /verify refuses, while
// the API keeps its bearer token.
func TestAdminDashboard(t *testing.T) {
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=1", "HTTP_PROTECT_BAN_LIMIT=100",
		envAdminListen+"=127.0.0.1:0", envAdminToken+"="+adminToken)
	base := "http://" + adminAddr(t, d)
	res, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), `<form id="login" method="post" action="login"`) ||
		!strings.HasPrefix(res.Header.Get("Content-Security-Policy"), "default-src 'none'; script-src 'self'") {
		t.Fatalf("GET / on the admin listener = %d, CSP %q, %s; want 200, the strict CSP, the login form", res.StatusCode, res.Header.Get("Content-Security-Policy"), body)
	}
	for i, want := range []int{200, 429, 429, 429} {
		if code := verifyFrom(t, d, "203.0.113.7"); code != want {
			t.Fatalf("/verify %d for 203.0.113.7 = %d, want %d", i+1, code, want)
		}
	}
	verifyFrom(t, d, "203.0.113.8")
	if code, _ := adminDo(t, http.DefaultClient, "GET", base+"/ui/now", ""); code != 401 {
		t.Fatalf("GET /ui/now without the token = %d, want 401", code)
	}
	code, body := adminDo(t, http.DefaultClient, "GET", base+"/ui/now", "Bearer "+adminToken)
	var now admin.NowRecord
	if code != 200 || json.Unmarshal(body, &now) != nil {
		t.Fatalf("GET /ui/now with the token = %d %s, want 200 and a NowRecord", code, body)
	}
	if len(now.Refused) != 1 || now.Refused[0].Key != "203.0.113.7" || now.Refused[0].Count != 3 || now.Refused[0].Status != "limited" {
		t.Errorf("GET /ui/now refused = %+v, want 203.0.113.7, 3 times limited", now.Refused)
	}
	if len(now.Protectors) != 1 || now.Protectors[0].Decisions["allowed"] != 2 || now.Protectors[0].Decisions["limited"] != 3 {
		t.Errorf("GET /ui/now protectors = %+v, want one, 2 allowed, 3 limited", now.Protectors)
	}
}

// The gRPC services' refusals count toward the dashboard's keys refused
// most, as /verify's do.
func TestGRPCRefusedOnDashboard(t *testing.T) {
	c := startGRPCDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=1", "HTTP_PROTECT_TTL=10s",
		envAdminListen+"=127.0.0.1:0", envAdminToken+"="+adminToken)
	for range 3 {
		shouldRateLimit(t, c, 0, descriptor(entryAddress, "198.51.100.1"))
	}
	code, body := adminDo(t, http.DefaultClient, "GET", "http://"+adminAddr(t, c.d)+"/ui/now", "Bearer "+adminToken)
	var now admin.NowRecord
	if code != 200 || json.Unmarshal(body, &now) != nil {
		t.Fatalf("GET /ui/now = %d %s, want 200 and a NowRecord", code, body)
	}
	if len(now.Refused) != 1 || now.Refused[0].Key != "198.51.100.1" || now.Refused[0].Count != 2 || now.Refused[0].Status != "limited" {
		t.Errorf("GET /ui/now refused after 3 ShouldRateLimit of a client allowed 1 = %+v, want 198.51.100.1 limited twice", now.Refused)
	}
}
