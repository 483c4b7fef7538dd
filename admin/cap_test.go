package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// targets is n distinct IPv6 targets of the longest form, a /128 CIDR.
func targets(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("2001:db8:ffff:ffff:ffff:ffff:%04x:%04x/128", i>>16, i&0xffff)
	}
	return out
}

// A ban or a lift names at most admin.MaxTargets targets and a body holds
// at most admin.MaxBody bytes: more is 413, too_large, stating the limit,
// and writes nothing; MaxTargets of the longest targets fit the body.
func TestAdminTargetCap(t *testing.T) {
	p, err := protect.New(protect.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	h := admin.Handler(p)
	body := func(ts []string) string {
		b, _ := json.Marshal(admin.BanRequest{Targets: ts, For: "1h", Reason: strings.Repeat("r", protect.MaxReasonLen)})
		return string(b)
	}
	lift := "/v1/bans?" + url.Values{"target": targets(admin.MaxTargets + 1)}.Encode()
	tests := []struct {
		name, method, path, body string
		status                   int
		detail                   string
	}{
		{"ban 10001", "POST", "/v1/bans", body(targets(admin.MaxTargets + 1)), 413,
			"targets: ban takes at most 10000 targets a request, got 10001: split them"},
		{"body over 1 MiB", "POST", "/v1/bans", `{"targets": ["` + strings.Repeat("1", admin.MaxBody) + `"]}`, 413,
			"body: more than 1048576 bytes; ban at most 10000 targets a request"},
		{"lift 10001", "DELETE", lift, "", 413,
			"targets: lift takes at most 10000 targets a request, got 10001: split them"},
	}
	for _, tc := range tests {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
		var pr admin.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &pr); err != nil || w.Code != tc.status || pr.Code != admin.CodeTooLarge || pr.Detail != tc.detail {
			t.Errorf("%s = %d %s, want %d, code %s, detail %q", tc.name, w.Code, w.Body.String(), tc.status, admin.CodeTooLarge, tc.detail)
		}
	}
	if bans, _ := admin.New(p).Bans(t.Context(), admin.Filter{}); len(bans) != 0 {
		t.Fatalf("Bans after the refused requests = %d, want 0", len(bans))
	}
	full := body(targets(admin.MaxTargets))
	if len(full) > admin.MaxBody {
		t.Fatalf("a ban of MaxTargets of the longest targets is %d bytes, over MaxBody %d", len(full), admin.MaxBody)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/bans", strings.NewReader(full)))
	var recs []admin.BanRecord
	if err := json.Unmarshal(w.Body.Bytes(), &recs); w.Code != 201 || err != nil || len(recs) != admin.MaxTargets {
		t.Fatalf("ban of %d targets = %d, %d records; want 201, %d", admin.MaxTargets, w.Code, len(recs), admin.MaxTargets)
	}
	// The library refuses as the API does.
	if _, err := admin.NewService(p).Lift(t.Context(), admin.LiftOptions{Targets: targets(admin.MaxTargets + 1)}); err == nil || !strings.Contains(err.Error(), "at most 10000") {
		t.Fatalf("Service.Lift(10001 targets) = %v, want too many targets", err)
	}
}
