package main

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestServerPartialFailure bans and lifts through a service of two ban
// lists, the second on a Redis nothing listens for: the first list's
// bans are written (and lifted), and protectctl shows them beside the
// failure instead of an error alone that would say nothing changed.
func TestServerPartialFailure(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // a real connection refused, on loopback

	quiet := slog.New(slog.DiscardHandler)
	mem := protect.NewMemoryStore(protect.MemoryOptions{})
	client := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	rs := redisstore.New(client, redisstore.Options{Logger: quiet, RangeRefresh: -1})
	var ps []*protect.Protector
	for _, c := range []protect.Config{
		{Name: "web", Namespace: "web:", BanNamespace: "web:", Store: mem},
		{Name: "api", Namespace: "api:", BanNamespace: "api:", Store: rs},
	} {
		c.Logger = quiet
		p, err := protect.New(c)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	srv := httptest.NewServer(admin.Handler(ps...))
	t.Cleanup(func() {
		srv.Close()
		for _, p := range ps {
			p.Close()
		}
		mem.Close()
		rs.Close()
	})

	code, out, errs := ctlServer(t, srv.URL, "ban", "-json", "-for", "1h", "203.0.113.7")
	var recs []admin.BanRecord
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatalf("protectctl -server ban -json 203.0.113.7: stdout %q is not JSON: %v", out, err)
	}
	if code != 1 || len(recs) != 1 || recs[0].BanNamespace != "web:" || recs[0].Key != "203.0.113.7" ||
		!strings.Contains(errs, "the store failed after 1 of the bans") {
		t.Fatalf("protectctl -server ban -json 203.0.113.7 = exit %d, %+v, stderr %q; want exit 1, the web: ban, and the failure after 1 ban", code, recs, errs)
	}
	if code, out, _ := ctlServer(t, srv.URL, "-namespace", "web:", "bans", "-json"); code != 0 || !strings.Contains(out, `"key": "203.0.113.7"`) {
		t.Fatalf("protectctl -server bans -namespace web: = exit %d\n%s\nwant the ban written before the failure", code, out)
	}

	code, out, errs = ctlServer(t, srv.URL, "lift", "-json", "203.0.113.7")
	recs = nil
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatalf("protectctl -server lift -json 203.0.113.7: stdout %q is not JSON: %v", out, err)
	}
	if code != 1 || len(recs) != 1 || recs[0].BanNamespace != "web:" || !strings.Contains(errs, "the store failed after 1 of the bans") {
		t.Fatalf("protectctl -server lift -json 203.0.113.7 = exit %d, %+v, stderr %q; want exit 1, the web: ban lifted, and the failure after 1", code, recs, errs)
	}
}
