package crowdsec_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/crowdsec"
	"github.com/httpprotect/protect/internal/logtest"
	"github.com/httpprotect/protect/internal/testclock"
)

// Range decisions that together cover a family (two /1s) are refused as
// a set: the decisions before them stay in force, the refusal is
// counted and logged once with the list's name, and the set is made
// again once the wide decisions are deleted (one /1 of IPv4 alone is
// half of it, and refused too).
func TestBouncerRefusesTooWideRanges(t *testing.T) {
	for _, halves := range [][2]string{{"0.0.0.0/1", "128.0.0.0/1"}, {"::/1", "8000::/1"}} {
		t.Run(halves[0], func(t *testing.T) {
			var calls atomic.Int32
			bodies := []string{
				`{"new":[{"id":1,"duration":"1h","scope":"Ip","type":"ban","value":"192.0.2.1"}],"deleted":null}`,
				fmt.Sprintf(`{"new":[{"id":2,"duration":"1h","scope":"Range","type":"ban","value":%q},
					{"id":3,"duration":"1h","scope":"Range","type":"ban","value":%q}],"deleted":null}`, halves[0], halves[1]),
				`{"new":[{"id":4,"duration":"1h","scope":"Ip","type":"ban","value":"192.0.2.4"}],"deleted":null}`,
				fmt.Sprintf(`{"new":null,"deleted":[{"id":2,"duration":"1h","scope":"Range","type":"ban","value":%q},
					{"id":3,"duration":"1h","scope":"Range","type":"ban","value":%q}]}`, halves[0], halves[1]),
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(calls.Add(1))
				w.Write([]byte(bodies[min(n, len(bodies))-1]))
			}))
			t.Cleanup(srv.Close)
			rec := &logtest.Recorder{}
			b, err := crowdsec.New(crowdsec.Options{URL: srv.URL, Key: "k", Clock: testclock.New().Now, Logger: slog.New(rec)})
			if err != nil {
				t.Fatal(err)
			}
			p := newProtector(t, b)
			want := func(when string, errors uint64, statuses map[string]protect.Status) {
				t.Helper()
				for addr, st := range statuses {
					if got := status(t, p, addr); got != st {
						t.Errorf("%s: VerifyAddr(%s) = %v, want %v", when, addr, got, st)
					}
				}
				if st := b.BlockSourceStatus(); st.Errors != errors || !st.Up {
					t.Errorf("%s: BlockSourceStatus() = %+v, want up, %d errors", when, st, errors)
				}
			}
			poll(t, b)
			want("first poll", 0, map[string]protect.Status{"192.0.2.1": protect.Blocked, "198.51.100.1": protect.Allowed, "2001:db8::1": protect.Allowed})
			poll(t, b)
			want("the two halves", 1, map[string]protect.Status{"192.0.2.1": protect.Blocked, "198.51.100.1": protect.Allowed, "2001:db8::1": protect.Allowed})
			poll(t, b)
			want("one more decision", 2, map[string]protect.Status{"192.0.2.4": protect.Allowed, "198.51.100.1": protect.Allowed})
			poll(t, b)
			want("the halves deleted", 2, map[string]protect.Status{"192.0.2.1": protect.Blocked, "192.0.2.4": protect.Blocked})
			var logged []map[string]string
			for _, r := range rec.Records() {
				if r["msg"] == "protect/crowdsec: decisions refused; the last set stays in force" {
					logged = append(logged, r)
				}
			}
			family := "100.0% of IPv4"
			if halves[0] == "::/1" {
				family = "100.0% of IPv6's global unicast space 2000::/3"
			}
			wantErr := "covers too much of an address family: " + family + " (half or more is refused)"
			if len(logged) != 1 || logged[0]["level"] != "WARN" || logged[0]["list"] != "crowdsec" || logged[0]["decisions"] != "3" || logged[0]["err"] != wantErr {
				t.Errorf("refusals logged = %v, want one WARN of list crowdsec, 3 decisions, err %q", logged, wantErr)
			}
		})
	}
}
