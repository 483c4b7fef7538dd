package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/webhook"
)

const webhookSecret = "0123456789abcdef-webhook"

// A webhook URL must be http(s) and comes with its secret; an error
// names the variable and never quotes the secret.
func TestWebhookSettings(t *testing.T) {
	for _, tc := range []struct {
		env []string
		err string
	}{
		{[]string{envWebhookURL + "=https://hooks.example/protect", envWebhookSecret + "=" + webhookSecret}, ""},
		{[]string{envWebhookURL + "=ftp://hooks.example/protect", envWebhookSecret + "=" + webhookSecret},
			envWebhookURL + ", " + envWebhookSecret + `: webhook: URL "ftp://hooks.example/protect": want http://host/path or https://host/path`},
		{[]string{envWebhookURL + "=https://user:hunter2@/x", envWebhookSecret + "=" + webhookSecret},
			envWebhookURL + ", " + envWebhookSecret + `: webhook: URL "https://user:xxxxx@/x": want http://host/path or https://host/path`},
		{[]string{envWebhookURL + "=https://hooks.example/protect"},
			envWebhookSecret + " is needed with " + envWebhookURL + ": the key its posts are signed with"},
		{[]string{envWebhookURL + "=https://hooks.example/protect", envWebhookSecret + "=hunter2"},
			envWebhookURL + ", " + envWebhookSecret + ": webhook: the secret has 7 bytes, want at least 16: a receiver tells protect's posts from forged ones by it"},
		{[]string{envWebhookSecret + "=" + webhookSecret}, envWebhookSecret + " is set without " + envWebhookURL + ": set both, or neither"},
	} {
		_, err := loadSinks(tc.env)
		if got := errText(err); got != tc.err {
			t.Errorf("loadSinks(%q) = error %q, want %q", tc.env, got, tc.err)
		}
	}
}

// protectd posts the ban a request earns and the lift an operator makes,
// in that order, each signed with the secret.
func TestWebhookPosts(t *testing.T) {
	posts := make(chan []admin.EventRecord, 10)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, sig := r.Header.Get(webhook.TimestampHeader), r.Header.Get(webhook.SignatureHeader)
		if !webhook.Verify([]byte(webhookSecret), ts, body, sig, time.Now()) {
			t.Errorf("post %s = %q, %s = %q, want the signature of the body posted now", webhook.TimestampHeader, ts, webhook.SignatureHeader, sig)
		}
		var b struct{ Events []admin.EventRecord }
		if err := json.Unmarshal(body, &b); err != nil {
			t.Errorf("post body %q: %v", body, err)
		}
		posts <- b.Events
	}))
	t.Cleanup(rcv.Close)
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1", "HTTP_PROTECT_MAX_REQUESTS=1", "HTTP_PROTECT_BAN_LIMIT=2",
		envAdminListen+"=127.0.0.1:0", envAdminToken+"="+adminToken,
		envWebhookURL+"="+rcv.URL+"/hook", envWebhookSecret+"="+webhookSecret)
	for range 3 {
		verifyFrom(t, d, "203.0.113.7")
	}
	lift := "http://" + adminAddr(t, d) + "/v1/bans?target=203.0.113.7"
	if code, body := adminDo(t, http.DefaultClient, "DELETE", lift, "Bearer "+adminToken); code != 200 {
		t.Fatalf("DELETE %s = %d %s, want 200", lift, code, body)
	}
	var got []string
	for len(got) < 2 {
		select {
		case evs := <-posts:
			for _, e := range evs {
				got = append(got, e.Kind+" "+e.Key+" "+e.BanNamespace)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("webhook events after 30s = %q, want a ban and a lift", got)
		}
	}
	want := []string{"ban 203.0.113.7 protect:", "lift 203.0.113.7 protect:"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("webhook events = %q, want %q", got, want)
	}
}
