package admin

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/testclock"
	"github.com/httpprotect/protect/memstore"
)

// call sends one request to srv and returns the status, the problem's
// code when it is not 2xx, and the body.
func call(t *testing.T, srv *httptest.Server, method, path, body string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, bytes.NewBufferString(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p Problem
	if resp.StatusCode/100 != 2 {
		json.Unmarshal(b, &p)
	}
	return resp.StatusCode, p.Code, b
}

func recordKeys(recs []BanRecord) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r.Key)
	}
	return out
}

// POST /v1/allows puts the targets on the allowlist and lifts the bans
// they cover: the client is Safe at once, never counted nor banned while
// the entry lasts, and counted again after it ends; a ban of an allowed
// address is 409; GET lists the entries, DELETE removes them.
func TestAllowsAPI(t *testing.T) {
	clock := testclock.New()
	st := memstore.New(memstore.Options{Clock: clock.Now})
	t.Cleanup(func() { st.Close() })
	p, err := protect.New(protect.Config{Store: st, Clock: clock.Now, MaxRequests: 2, BanLimit: 3, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv := eventServer(t, p)
	ctx := t.Context()
	client := netip.MustParseAddr("203.0.113.7")
	verify := func() protect.Status {
		t.Helper()
		d, err := p.VerifyAddr(ctx, client)
		if err != nil {
			t.Fatal(err)
		}
		return d.Status
	}
	for verify() != protect.Banned {
	}
	if _, err := p.Ban(ctx, "198.51.100.0/28", protect.BanOptions{Reason: "range"}); err != nil {
		t.Fatal(err)
	}

	code, name, body := call(t, srv, "POST", "/v1/allows", `{"targets": ["203.0.113.7", "198.51.100.0/24"], "for": "1h", "reason": "monitor", "by": "ops"}`)
	var res AllowResult
	if code != 201 || json.Unmarshal(body, &res) != nil {
		t.Fatalf("POST /v1/allows = %d %s %s, want 201", code, name, body)
	}
	if got, want := recordKeys(res.Allowed), []string{"203.0.113.7", "198.51.100.0/24"}; !slices.Equal(got, want) {
		t.Errorf("POST /v1/allows allowed %q, want %q", got, want)
	}
	if got, want := recordKeys(res.Lifted), []string{"203.0.113.7", "198.51.100.0/28"}; !slices.Equal(got, want) {
		t.Errorf("POST /v1/allows lifted %q, want %q", got, want)
	}
	if r := res.Allowed[0]; r.Reason != "monitor" || r.By != "ops" || r.SecondsLeft == nil || *r.SecondsLeft != 3600 {
		t.Errorf("allowed record = %+v, want reason monitor, by ops, 3600s left", r)
	}
	for i := range 5 {
		if s := verify(); s != protect.Safe {
			t.Fatalf("Verify %d of allowed %s = %v, want Safe", i+1, client, s)
		}
	}
	if code, name, _ := call(t, srv, "POST", "/v1/bans", `{"targets": ["203.0.113.7"]}`); code != 409 || name != CodeAllowed {
		t.Errorf("POST /v1/bans of an allowed address = %d %q, want 409 %q", code, name, CodeAllowed)
	}
	code, _, body = call(t, srv, "GET", "/v1/allows", "")
	var list []BanRecord
	if code != 200 || json.Unmarshal(body, &list) != nil || !slices.Equal(recordKeys(list), []string{"198.51.100.0/24", "203.0.113.7"}) {
		t.Fatalf("GET /v1/allows = %d %s, want both entries", code, body)
	}

	clock.Advance(time.Hour)
	if s := verify(); s != protect.Allowed {
		t.Fatalf("Verify of %s after its entry ended = %v, want Allowed (counted again)", client, s)
	}
	code, _, body = call(t, srv, "DELETE", "/v1/allows?target=198.51.100.0/24", "")
	if code != 200 || string(bytes.TrimSpace(body)) != "[]" {
		t.Fatalf("DELETE /v1/allows of an ended entry = %d %s, want 200 []", code, body)
	}

	if _, err := p.Ban(ctx, "192.0.2.1", protect.BanOptions{}); err != nil {
		t.Fatal(err)
	}
	call(t, srv, "POST", "/v1/allows", `{"targets": ["192.0.2.1"]}`)
	code, _, body = call(t, srv, "DELETE", "/v1/allows?target=192.0.2.1", "")
	if code != 200 || json.Unmarshal(body, &list) != nil || !slices.Equal(recordKeys(list), []string{"192.0.2.1"}) || list[0].Permanent != true {
		t.Fatalf("DELETE /v1/allows?target=192.0.2.1 = %d %s, want the permanent entry", code, body)
	}
	if d, _ := p.VerifyAddr(ctx, netip.MustParseAddr("192.0.2.1")); d.Status != protect.Allowed || d.Count != 1 {
		t.Fatalf("Verify of 192.0.2.1 after disallow = %v count %d, want Allowed 1: its ban was lifted", d.Status, d.Count)
	}
}

// Bad requests change nothing and say why.
func TestAllowsAPIErrors(t *testing.T) {
	srv := eventServer(t, eventProtector(t, nil))
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/v1/allows", `{"targets": ["consumer:alice"]}`, 400, CodeBadTarget},
		{"POST", "/v1/allows", `{"targets": ["not an address"]}`, 400, CodeBadTarget},
		{"POST", "/v1/allows", `{"targets": ["10.0.0.0/7"]}`, 400, CodeWideTarget},
		{"POST", "/v1/allows", `{"targets": []}`, 400, CodeBadTarget},
		{"POST", "/v1/allows", `{"targets": ["192.0.2.1"], "for": "soon"}`, 400, CodeBadRequest},
		{"POST", "/v1/allows", `{"targets": ["192.0.2.1"], "forever": true}`, 400, CodeBadRequest},
		{"DELETE", "/v1/allows?target=192.0.2.300", "", 400, CodeBadTarget},
		{"PUT", "/v1/allows", "", 405, CodeMethod},
	} {
		if code, name, body := call(t, srv, tc.method, tc.path, tc.body); code != tc.status || name != tc.code {
			t.Errorf("%s %s %s = %d %q %s, want %d %q", tc.method, tc.path, tc.body, code, name, body, tc.status, tc.code)
		}
	}
	if code, _, body := call(t, srv, "GET", "/v1/allows", ""); code != 200 || string(bytes.TrimSpace(body)) != "[]" {
		t.Errorf("GET /v1/allows after refused requests = %d %s, want 200 []", code, body)
	}
	none := eventServer(t, eventProtector(t, plainStore{memstore.New(memstore.Options{})}))
	if code, name, _ := call(t, none, "GET", "/v1/allows", ""); code != 501 || name != CodeNoAllowlist {
		t.Errorf("GET /v1/allows of a store without allowlist = %d %q, want 501 %q", code, name, CodeNoAllowlist)
	}
}

// An allowed address on a block list is Safe, as a safe network's is:
// the allowlist is step 2, before the lists.
func TestAllowPassesBlockList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drop.txt")
	if err := os.WriteFile(path, []byte("198.51.100.0/24\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler),
		BlockLists: []protect.BlockList{{Name: "drop", Path: path, Format: protect.FormatPlain}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx := t.Context()
	a := netip.MustParseAddr("198.51.100.7")
	if d, _ := p.VerifyAddr(ctx, a); d.Status != protect.Blocked {
		t.Fatalf("VerifyAddr(%s) on the list = %v, want Blocked", a, d.Status)
	}
	if _, _, err := New(p).Allow(ctx, []string{"198.51.100.7"}, AllowOptions{Reason: "partner"}); err != nil {
		t.Fatal(err)
	}
	if d, _ := p.VerifyAddr(ctx, a); d.Status != protect.Safe {
		t.Fatalf("VerifyAddr(%s) allowed, on the list = %v, want Safe", a, d.Status)
	}
	if d, _ := p.VerifyAddr(ctx, netip.MustParseAddr("198.51.100.8")); d.Status != protect.Blocked {
		t.Fatalf("VerifyAddr(198.51.100.8) on the list, not allowed = %v, want Blocked", d.Status)
	}
}
