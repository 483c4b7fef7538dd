package admin_test

import (
	"fmt"
	"testing"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// Explain says why a client is unknown (which entry was bad, a missing
// header from a unix socket), when it ignored a header from a
// peer that is not a trusted proxy, and when the trusted address a walk
// ended on is the client (and whether it is safe).
func TestExplainResolution(t *testing.T) {
	p := newProtector(protect.Config{TrustedProxies: []string{"10.0.0.0/8"}, SafeNetworks: []string{"10.1.0.0/16"}})
	t.Cleanup(func() { p.Close() })
	a := admin.New(p)
	tests := []struct {
		peer, xff    string
		step, client string
		reason       string
		notes        string
	}{
		{"10.0.0.1:5555", "1.2.3.4, garbage", admin.StepUnknown, "",
			`client address unknown: the forwarding header holds an entry that is not an address: "garbage"`, "[]"},
		{"10.0.0.1:5555", "", admin.StepAllowed, "10.0.0.1", "",
			"[no untrusted entry in X-Forwarded-For: the walk ended on the peer, 10.0.0.1, a trusted address, which is the client, as nginx's realip module decides]"},
		{"10.0.0.1:5555", "10.0.0.3, 10.0.0.2", admin.StepAllowed, "10.0.0.3", "",
			"[no untrusted entry in X-Forwarded-For: the walk ended on the leftmost entry, 10.0.0.3, a trusted address, which is the client, as nginx's realip module decides]"},
		{"10.1.2.3:5555", "", admin.StepSafe, "10.1.2.3", "",
			"[no untrusted entry in X-Forwarded-For: the walk ended on the peer, 10.1.2.3, a trusted address, which is the client, as nginx's realip module decides, and in SafeNetworks: safe]"},
		{"9.9.9.9:1234", "1.2.3.4", admin.StepAllowed, "9.9.9.9", "",
			"[X-Forwarded-For ignored: the peer 9.9.9.9 is not a trusted proxy, and a client that connects directly can write any header]"},
		{"10.0.0.1:5555", "6.6.6.6, 1.2.3.4", admin.StepAllowed, "1.2.3.4", "", "[]"},
	}
	for _, tt := range tests {
		h := map[string][]string{}
		if tt.xff != "" {
			h["X-Forwarded-For"] = []string{tt.xff}
		}
		ex, err := a.Explain(t.Context(), tt.peer, h)
		if err != nil {
			t.Fatal(err)
		}
		if ex.Step != tt.step || ex.Client != tt.client || ex.Reason != tt.reason || fmt.Sprint(ex.Notes) != tt.notes {
			t.Errorf("Explain(%s, X-Forwarded-For %q) = step %s client %q reason %q notes %s\nwant step %s client %q reason %q notes %s",
				tt.peer, tt.xff, ex.Step, ex.Client, ex.Reason, ex.Notes, tt.step, tt.client, tt.reason, tt.notes)
		}
	}
}
