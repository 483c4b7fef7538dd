package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/logtest"
)

// A client that hangs up as soon as it has sent its guess still has the
// failure counted: the count does not follow the request's context. (On
// Redis a cancelled context would cancel the call.)
func TestFailureCountedWhenClientHangsUp(t *testing.T) {
	cfg := protect.Config{MaxRequests: 5, CountStatus: is401}
	for name, p := range map[string]*protect.Protector{
		"memory":    func() *protect.Protector { p, _ := newTestProtector(t, cfg); return p }(),
		"miniredis": newInstance(t, miniredis.RunT(t).Addr(), "protect:", cfg, Options{RangeRefresh: -1}).p,
	} {
		t.Run(name, func(t *testing.T) {
			h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.Context().Value(cancelKey{}).(context.CancelFunc)() // the client is gone
				http.Error(w, "wrong password", http.StatusUnauthorized)
			}))
			for range 3 {
				ctx, cancel := context.WithCancel(context.Background())
				ctx = context.WithValue(ctx, cancelKey{}, cancel)
				r := httptest.NewRequestWithContext(ctx, "POST", "/login", nil)
				r.RemoteAddr = "198.51.100.4:1"
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
			if st := inspectCount(t, p, "198.51.100.4"); st.Count != 3 {
				t.Fatalf("count = %d; want 3", st.Count)
			}
		})
	}
}

// On Redis (miniredis, a real server, a cluster): three instances
// penalizing one client at once count exactly n × calls, each penalty is
// one round trip, and the ban is written once.
func TestRedisPenalizeExact(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			client := "203.0.113.7"
			r := func() *http.Request { return request(client + ":1234") }
			t.Run("count", func(t *testing.T) {
				ns := testNamespace(t, addr)
				var inst [3]*instance
				for i := range inst {
					inst[i] = newInstance(t, addr, ns, protect.Config{MaxRequests: 1000, BanLimit: 10_000, StoreTimeout: 10 * time.Second, CountStatus: is401}, Options{RangeRefresh: -1})
				}
				// One round trip per penalty, once the script is loaded.
				in := inst[0]
				in.p.Penalize(t.Context(), r(), 2)
				in.hook.Take()
				for _, n := range []int64{1, 2, 5} {
					if d, err := in.p.Penalize(t.Context(), r(), n); err != nil || d.Err != nil {
						t.Fatalf("Penalize(%d): %v %v", n, err, d.Err)
					}
					if trips, names := in.hook.Take(); trips != 1 || len(names) != 1 || names[0] != "evalsha" {
						t.Fatalf("Penalize(%d): %d round trips %v; want 1 evalsha", n, trips, names)
					}
				}
				start := inspectCount(t, in.p, client).Count
				if start != 10 {
					t.Fatalf("count before the run = %d; want 10", start)
				}
				var wg sync.WaitGroup
				for i := range 150 {
					wg.Go(func() {
						if d, err := inst[i%3].p.Penalize(t.Context(), r(), 2); err != nil || d.Err != nil || d.Status != protect.Allowed {
							t.Errorf("penalty %d: %v %v %v", i, d.Status, err, d.Err)
						}
					})
				}
				wg.Wait()
				if st := inspectCount(t, inst[1].p, client); st.Count != start+300 {
					t.Fatalf("count = %d; want %d", st.Count, start+300)
				}
			})
			t.Run("ban", func(t *testing.T) {
				ns := testNamespace(t, addr)
				logs := &logtest.Recorder{}
				var inst [3]*instance
				for i := range inst {
					inst[i] = newInstance(t, addr, ns, protect.Config{MaxRequests: 100, BanLimit: 250, StoreTimeout: 10 * time.Second, CountStatus: is401, Logger: slog.New(logs)}, Options{RangeRefresh: -1})
				}
				got := sendAll(t, 150, true, func(i int) (protect.Decision, error) { return inst[i%3].p.Penalize(t.Context(), r(), 2) })
				// Counts 2…100 allowed (50), 102…250 limited (75), 252 bans,
				// and the 24 after it meet the ban.
				if got[protect.Allowed] != 50 || got[protect.Limited] != 75 || got[protect.Banned] != 25 || len(got) != 3 {
					t.Fatalf("got %v; want allowed 50, limited 75, banned 25", got)
				}
				added := logs.Count("protect: ban added")
				if added != 1 {
					t.Fatalf("%d bans logged; want 1", added)
				}
				st := inspectCount(t, inst[2].p, client)
				if st.Ban == nil || st.Offenses != 1 || st.Count != 0 || st.Ban.Reason != "failures passed the ban limit of 250" {
					t.Fatalf("Inspect = %+v, ban %+v; want one ban, one offense, no counter", st, st.Ban)
				}
				keys, err := allKeys(t.Context(), inst[0].store.client, globEscape(ns)+"*")
				keys = withoutPublished(keys, ns)
				if err != nil || len(keys) != 5 {
					t.Fatalf("keys %v, %v; want the ban, the offense history, the ban index, its records and the journal", keys, err)
				}
				for _, in := range inst {
					bans, err := admin.New(in.p).Bans(t.Context(), admin.Filter{})
					if err != nil || len(bans) != 1 || bans[0].Key.String() != client || bans[0].Offense != 1 {
						t.Fatalf("bans %+v, %v", bans, err)
					}
				}
			})
		})
	}
}

// Over Redis the middleware counts failures in one round trip each, and
// checks in one: two per failure, one per success.
func TestRedisFailureMiddlewareRoundTrips(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			in := newInstance(t, addr, testNamespace(t, addr), protect.Config{MaxRequests: 3, BanLimit: 4, TTL: time.Minute, CountStatus: is401}, Options{RangeRefresh: -1})
			h := in.p.Middleware(loginApp)
			const peer = "192.0.2.30:1"
			login(h, peer, "hunter2") // loads the script
			in.hook.Take()
			tests := []struct {
				password string
				code     int
				trips    int64
			}{
				{"hunter2", 200, 1}, {"wrong", 401, 2}, {"wrong", 401, 2}, {"wrong", 401, 2},
				{"hunter2", 429, 2}, // checked, then counted
				{"hunter2", 403, 2}, // counted past BanLimit
				{"hunter2", 403, 0}, // the ban is cached
			}
			for i, tt := range tests {
				got := login(h, peer, tt.password)
				trips, names := in.hook.Take()
				if got.code != tt.code || trips != tt.trips {
					t.Fatalf("step %d: %v, %d round trips %v; want %d in %d", i+1, got, trips, names, tt.code, tt.trips)
				}
			}
		})
	}
}

// With the store down, the failure middleware follows OnStoreError as
// Verify does: FailOpen serves, FailClosed refuses with 503 before the
// handler, FailLocal keeps counting failures in this process.
func TestFailureMiddlewareStoreDown(t *testing.T) {
	tests := []struct {
		policy protect.FailurePolicy
		want   string
	}{
		{protect.FailOpen, "401 401 401 401 401"},
		{protect.FailClosed, "503 503 503 503 503"},
		{protect.FailLocal, "401 401 401 429 429"},
	}
	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			m := miniredis.RunT(t)
			in := newInstance(t, m.Addr(), "protect:", protect.Config{MaxRequests: 3, CountStatus: is401, OnStoreError: tt.policy}, Options{RangeRefresh: -1})
			m.Close()
			h := in.p.Middleware(loginApp)
			var codes []string
			for range 5 {
				got := login(h, "192.0.2.40:1", "wrong")
				codes = append(codes, fmt.Sprint(got.code))
				if got.code == 401 && got.retryAfter != "" {
					t.Fatalf("a handler's 401 with Retry-After %q", got.retryAfter)
				}
			}
			if got := strings.Join(codes, " "); got != tt.want {
				t.Fatalf("codes %s; want %s", got, tt.want)
			}
		})
	}
}
