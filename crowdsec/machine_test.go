package crowdsec_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/crowdsec"
	"github.com/httpprotect/protect/internal/crowdsectest"
	"github.com/httpprotect/protect/internal/logtest"
)

// startMachine starts m on src until the test ends.
func startMachine(t *testing.T, m *crowdsec.Machine, src crowdsec.EventSource) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done, err := m.Start(ctx, src)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { cancel(); <-done })
}

// lapiDecisions returns "scope value origin type scenario" of each of the
// LAPI's decisions in force, sorted.
func lapiDecisions(t *testing.T, l *crowdsectest.LAPI) []string {
	t.Helper()
	var out []string
	for _, d := range l.Decisions(t) {
		out = append(out, strings.Join([]string{d.Scope, d.Value, d.Origin, d.Type, d.Scenario}, " "))
	}
	slices.Sort(out)
	return out
}

// waitDecisions polls the LAPI until its decisions are want, or fails
// after a while that asserts nothing of speed.
func waitDecisions(t *testing.T, l *crowdsectest.LAPI, want []string, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := lapiDecisions(t, l)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: cscli decisions list = %q, want %q\nlog:\n%s", what, got, want, l.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Against a real LAPI: a ban of an address and a permanent one of a
// range become decisions of origin protect, with the time left of each
// ban; a ban written in CrowdSec's name and a consumer's are not pushed;
// a lift deletes the decision.
func TestMachineRealLAPI(t *testing.T) {
	l := crowdsectest.Start(t)
	id, pw := l.Machine(t)
	p, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	m, err := crowdsec.NewMachine(crowdsec.MachineOptions{URL: l.URL, MachineID: id, Password: pw,
		Poll: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	startMachine(t, m, admin.New(p))

	ctx := t.Context()
	for _, b := range []struct {
		target string
		opt    protect.BanOptions
	}{
		{"192.0.2.99", protect.BanOptions{For: time.Hour, Reason: "pulled", By: crowdsec.Name}},
		{"192.0.2.10", protect.BanOptions{For: time.Hour, Reason: "scanner"}},
		{"198.51.100.0/24", protect.BanOptions{Permanent: true, Reason: "bad net"}},
	} {
		if _, err := p.Ban(ctx, b.target, b.opt); err != nil {
			t.Fatalf("Ban(%q): %v", b.target, err)
		}
	}
	waitDecisions(t, l, []string{
		"Ip 192.0.2.10 protect ban protect/scanner",
		"Range 198.51.100.0/24 protect ban protect/bad net",
	}, "after the bans")
	for _, d := range l.Decisions(t) {
		left, err := time.ParseDuration(d.Duration)
		if err != nil {
			t.Fatalf("decision %s duration %q: %v", d.Value, d.Duration, err)
		}
		switch d.Value {
		case "192.0.2.10":
			if left <= 50*time.Minute || left > time.Hour {
				t.Errorf("decision 192.0.2.10 duration = %v, want the hour's time left", left)
			}
		case "198.51.100.0/24":
			if left < 9*365*24*time.Hour {
				t.Errorf("decision 198.51.100.0/24 duration = %v, want ten years for a permanent ban", left)
			}
		}
	}

	// A decision of CrowdSec's own on the value outlives the lift.
	l.Cscli(t, "decisions", "add", "--ip", "192.0.2.10", "--duration", "1h", "--reason", "own")
	if _, err := p.Lift(ctx, "192.0.2.10", "ops"); err != nil {
		t.Fatal(err)
	}
	waitDecisions(t, l, []string{"Ip 192.0.2.10 cscli ban own", "Range 198.51.100.0/24 protect ban protect/bad net"}, "after the lift")
	st := m.Stats()
	if st.Pushed != 2 || st.Deleted != 1 || st.Skipped != 1 || st.Refused != 0 || st.Dropped != 0 || st.Logins < 1 {
		t.Errorf("Stats() = %+v, want 2 pushed, 1 deleted, 1 skipped, none refused or dropped, a login", st)
	}
}

// events is an EventSource of a slice, whose cursors are indexes.
type events struct {
	mu   sync.Mutex
	recs []admin.EventRecord
}

func (e *events) add(recs ...admin.EventRecord) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range recs {
		r.Cursor = strconv.Itoa(len(e.recs) + 1)
		e.recs = append(e.recs, r)
	}
}

func (e *events) Events(_ context.Context, since string, limit int) ([]admin.EventRecord, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, _ := strconv.Atoi(since)
	out := slices.Clone(e.recs[min(n, len(e.recs)):])
	return out[:min(len(out), limit)], nil
}

// A fake LAPI: the first push is answered 401 (a token gone), and the
// Machine logs in again at once; the first deletion 503, and it is tried
// again after the backoff. The bans before a lift go in one post before
// it, in the journal's order, and events CrowdSec's, a consumer's and
// unreadable ones are not told.
func TestMachineRetries(t *testing.T) {
	var mu sync.Mutex
	var log []string
	posts, deletes := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/watchers/login":
			var req struct {
				MachineID string `json:"machine_id"`
				Password  string `json:"password"`
			}
			json.Unmarshal(body, &req)
			log = append(log, "login "+req.MachineID)
			if req.Password != "pw-secret" {
				w.WriteHeader(401)
				return
			}
			fmt.Fprintf(w, `{"code":200,"expire":%q,"token":"tok%d"}`, time.Now().Add(time.Hour).Format(time.RFC3339), len(log))
		case r.Method == "POST" && r.URL.Path == "/v1/alerts":
			posts++
			var as []struct {
				Scenario  string
				Decisions []struct{ Scope, Value, Origin, Type, Scenario string }
			}
			if err := json.Unmarshal(body, &as); err != nil {
				t.Errorf("POST /v1/alerts body %q: %v", body, err)
			}
			var vs []string
			for _, a := range as {
				for _, d := range a.Decisions {
					vs = append(vs, d.Scope+":"+d.Value)
				}
			}
			log = append(log, fmt.Sprintf("post %s %s", r.Header.Get("Authorization"), strings.Join(vs, ",")))
			if posts == 1 {
				w.WriteHeader(401)
				return
			}
			w.WriteHeader(201)
			io.WriteString(w, `["1"]`)
		case r.Method == "DELETE" && r.URL.Path == "/v1/decisions":
			deletes++
			log = append(log, "delete "+r.URL.RawQuery)
			if deletes == 1 {
				w.WriteHeader(503)
				return
			}
			io.WriteString(w, `{"nbDeleted":"1"}`)
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			w.WriteHeader(404)
		}
	}))
	t.Cleanup(srv.Close)

	var waits []time.Duration
	var wmu sync.Mutex
	wait := func(ctx context.Context, d time.Duration) bool {
		if d >= time.Second { // a backoff, not a poll
			wmu.Lock()
			waits = append(waits, d)
			wmu.Unlock()
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Millisecond):
			return true
		}
	}
	m, err := crowdsec.NewMachine(crowdsec.MachineOptions{URL: srv.URL + "/", MachineID: "m1", Password: "pw-secret",
		Poll: time.Millisecond, Wait: wait, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	src := &events{}
	startMachine(t, m, src)
	later := time.Now().Add(time.Hour)
	src.add(
		admin.EventRecord{Kind: "ban", Key: "192.0.2.1", Reason: "a", Source: "auto", Expires: &later},
		admin.EventRecord{Kind: "ban", Key: "192.0.2.2", Source: "list", By: crowdsec.Name, Expires: &later},
		admin.EventRecord{Kind: "ban", Key: "2001:db8:1:2::/64", Range: true, Source: "auto", Expires: &later},
		admin.EventRecord{Kind: "ban", Key: "cus_acme", Source: "manual"},
		admin.EventRecord{Kind: "lift", Key: "192.0.2.1", Reason: "a", Source: "auto", Expires: &later},
		admin.EventRecord{Kind: "ban", Key: "192.0.2.3", Malformed: "bad record"},
		admin.EventRecord{Kind: "allow", Key: "192.0.2.4"},
	)
	deadline := time.Now().Add(10 * time.Second)
	for m.Stats().Deleted < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no deletion after 10s; stats %+v", m.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	got := slices.Clone(log)
	mu.Unlock()
	want := []string{
		"login m1",
		"post Bearer tok1 Ip:192.0.2.1,Range:2001:db8:1:2::/64",
		"login m1",
		"post Bearer tok3 Ip:192.0.2.1,Range:2001:db8:1:2::/64",
		"delete origin=protect&type=ban&value=192.0.2.1",
		"delete origin=protect&type=ban&value=192.0.2.1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("requests = %q, want %q", got, want)
	}
	wmu.Lock()
	if !slices.Equal(waits, []time.Duration{time.Second}) {
		t.Errorf("backoffs = %v, want [1s]", waits)
	}
	wmu.Unlock()
	st := m.Stats()
	if st.Pushed != 2 || st.Deleted != 1 || st.Skipped != 3 || st.Retries != 1 || st.Logins != 2 || st.Refused != 0 {
		t.Errorf("Stats() = %+v, want 2 pushed, 1 deleted, 3 skipped, 1 retry, 2 logins", st)
	}
}

// NewMachine's errors name what is wrong and never quote the password.
func TestNewMachineErrors(t *testing.T) {
	for _, tc := range []struct {
		o    crowdsec.MachineOptions
		want string
	}{
		{crowdsec.MachineOptions{URL: "127.0.0.1:8080", MachineID: "m", Password: "hunter2"},
			`crowdsec: URL "127.0.0.1:8080": want http://host:port or https://host:port`},
		{crowdsec.MachineOptions{URL: "http://m:hunter2@127.0.0.1:8080", MachineID: "m", Password: "hunter2"},
			`crowdsec: URL "http://m:xxxxx@127.0.0.1:8080": the machine's password goes in Password, not in the URL`},
		{crowdsec.MachineOptions{URL: "http://127.0.0.1:8080", MachineID: "m"},
			"crowdsec: MachineID and Password are both required"},
	} {
		_, err := crowdsec.NewMachine(tc.o)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("NewMachine(%q) = error %q, want %q", tc.o.URL, got, tc.want)
		}
	}
}

// fakeLAPI answers logins with a token and hands every other request to
// h; it records each request as "METHOD path?query".
func fakeLAPI(t *testing.T, h func(w http.ResponseWriter, r *http.Request, body []byte)) (url string, requests func() []string) {
	t.Helper()
	var mu sync.Mutex
	var reqs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs = append(reqs, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		if r.URL.Path == "/v1/watchers/login" {
			fmt.Fprintf(w, `{"code":200,"expire":%q,"token":"tok"}`, time.Now().Add(time.Hour).Format(time.RFC3339))
			return
		}
		h(w, r, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(reqs)
	}
}

// noSleep is a MachineOptions.Wait that waits a millisecond.
func noSleep(ctx context.Context, _ time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Millisecond):
		return true
	}
}

// until polls cond for up to 10s, and fails with what otherwise.
func until(t *testing.T, cond func() bool, what func() string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
	}
}

// A push the LAPI refuses with a 400 is dropped and counted, not tried
// again; the next events go on.
func TestMachineRefused(t *testing.T) {
	url, requests := fakeLAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), "192.0.2.1") {
			w.WriteHeader(400)
			io.WriteString(w, `{"message":"validation failure"}`)
			return
		}
		w.WriteHeader(201)
		io.WriteString(w, `["1"]`)
	})
	m, err := crowdsec.NewMachine(crowdsec.MachineOptions{URL: url, MachineID: "m", Password: "pw", Batch: 1,
		Poll: time.Millisecond, Wait: noSleep, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	src := &events{}
	startMachine(t, m, src)
	later := time.Now().Add(time.Hour)
	src.add(admin.EventRecord{Kind: "ban", Key: "192.0.2.1", Expires: &later}, admin.EventRecord{Kind: "ban", Key: "192.0.2.2", Expires: &later})
	until(t, func() bool { return m.Stats().Pushed == 1 }, func() string { return fmt.Sprintf("Stats() = %+v, want 1 pushed", m.Stats()) })
	want := []string{"POST /v1/watchers/login", "POST /v1/alerts", "POST /v1/alerts"}
	if got := requests(); !slices.Equal(got, want) {
		t.Errorf("requests = %q, want %q", got, want)
	}
	if st := m.Stats(); st.Refused != 1 || st.Retries != 0 {
		t.Errorf("Stats() = %+v, want 1 refused and no retry", st)
	}
}

// A LAPI whose deletions take no origin filter (a 400 that names it) is
// asked again without it, and from then on.
func TestMachineDeleteWithoutOrigin(t *testing.T) {
	url, requests := fakeLAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Query().Has("origin") {
			w.WriteHeader(400)
			io.WriteString(w, `{"message":"'origin' doesn't exist: invalid filter"}`)
			return
		}
		io.WriteString(w, `{"nbDeleted":"1"}`)
	})
	m, err := crowdsec.NewMachine(crowdsec.MachineOptions{URL: url, MachineID: "m", Password: "pw",
		Poll: time.Millisecond, Wait: noSleep, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	src := &events{}
	startMachine(t, m, src)
	src.add(admin.EventRecord{Kind: "lift", Key: "192.0.2.1"}, admin.EventRecord{Kind: "expire", Key: "198.51.100.0/24", Range: true})
	until(t, func() bool { return m.Stats().Deleted == 2 }, func() string { return fmt.Sprintf("Stats() = %+v, want 2 deleted", m.Stats()) })
	want := []string{
		"POST /v1/watchers/login",
		"DELETE /v1/decisions?origin=protect&type=ban&value=192.0.2.1",
		"DELETE /v1/decisions?type=ban&value=192.0.2.1",
		"DELETE /v1/decisions?type=ban&value=198.51.100.0%2F24",
	}
	if got := requests(); !slices.Equal(got, want) {
		t.Errorf("requests = %q, want %q", got, want)
	}
}

// A login the LAPI refuses is tried again after a backoff, and its log
// lines never quote the password.
func TestMachineLoginRefused(t *testing.T) {
	var mu sync.Mutex
	logins := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		logins++
		mu.Unlock()
		w.WriteHeader(401)
		io.WriteString(w, `{"code":401,"message":"incorrect Username or Password"}`)
	}))
	t.Cleanup(srv.Close)
	rec := &logtest.Recorder{}
	m, err := crowdsec.NewMachine(crowdsec.MachineOptions{URL: srv.URL, MachineID: "m", Password: "hunter2-secret",
		Poll: time.Millisecond, Wait: noSleep, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	src := &events{}
	startMachine(t, m, src)
	later := time.Now().Add(time.Hour)
	src.add(admin.EventRecord{Kind: "ban", Key: "192.0.2.1", Expires: &later})
	until(t, func() bool { return m.Stats().Retries >= 2 }, func() string { return fmt.Sprintf("Stats() = %+v, want retries", m.Stats()) })
	for _, r := range rec.Records() {
		for k, v := range r {
			if strings.Contains(v, "hunter2") {
				t.Errorf("log %s = %q, want no password", k, v)
			}
		}
	}
	if n := rec.Count("crowdsec machine: push failed"); n < 2 {
		t.Errorf("%d lines \"crowdsec machine: push failed\", want at least 2", n)
	}
	if st := m.Stats(); st.Pushed != 0 || st.Logins != 0 {
		t.Errorf("Stats() = %+v, want nothing pushed and no login", st)
	}
}

// While the LAPI is down, the queue keeps the newest events up to its
// bound and counts the ones it drops.
func TestMachineQueueBound(t *testing.T) {
	var down sync.Mutex
	down.Lock()
	var mu sync.Mutex
	var values []string
	url, _ := fakeLAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if !down.TryLock() {
			w.WriteHeader(503)
			return
		}
		down.Unlock()
		var as []struct{ Source struct{ Value string } }
		json.Unmarshal(body, &as)
		mu.Lock()
		for _, a := range as {
			values = append(values, a.Source.Value)
		}
		mu.Unlock()
		w.WriteHeader(201)
	})
	m, err := crowdsec.NewMachine(crowdsec.MachineOptions{URL: url, MachineID: "m", Password: "pw", Queue: 2, Batch: 1,
		Poll: time.Millisecond, Wait: noSleep, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	src := &events{}
	startMachine(t, m, src)
	later := time.Now().Add(time.Hour)
	src.add(admin.EventRecord{Kind: "ban", Key: "192.0.2.1", Expires: &later})
	until(t, func() bool { return m.Stats().Retries >= 1 }, func() string { return "no retry of the first push" })
	for i := 2; i <= 6; i++ {
		src.add(admin.EventRecord{Kind: "ban", Key: fmt.Sprintf("192.0.2.%d", i), Expires: &later})
	}
	until(t, func() bool { return m.Stats().Dropped == 3 }, func() string { return fmt.Sprintf("Stats() = %+v, want 3 dropped", m.Stats()) })
	down.Unlock()
	until(t, func() bool { return m.Stats().Pushed == 3 }, func() string { return fmt.Sprintf("Stats() = %+v, want 3 pushed", m.Stats()) })
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"192.0.2.1", "192.0.2.5", "192.0.2.6"}; !slices.Equal(values, want) {
		t.Errorf("pushed %q, want %q: the one in flight, then the newest two", values, want)
	}
}

// The Machine logs in again a minute before its token expires, by its
// clock, and tells each decision the ban's time left by that clock.
func TestMachineTokenExpiry(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var now atomic.Int64
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	var mu sync.Mutex
	var log []string
	logins := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/v1/watchers/login" {
			logins++
			log = append(log, "login")
			fmt.Fprintf(w, `{"code":200,"expire":%q,"token":"tok%d"}`, clock().Add(2*time.Minute).Format(time.RFC3339), logins)
			return
		}
		var as []struct {
			Decisions []struct{ Value, Duration string }
		}
		json.Unmarshal(body, &as)
		for _, a := range as {
			for _, d := range a.Decisions {
				log = append(log, r.Header.Get("Authorization")+" "+d.Value+" "+d.Duration)
			}
		}
		w.WriteHeader(201)
	}))
	t.Cleanup(srv.Close)
	m, err := crowdsec.NewMachine(crowdsec.MachineOptions{URL: srv.URL, MachineID: "m", Password: "pw", Clock: clock,
		Poll: time.Millisecond, Wait: noSleep, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	src := &events{}
	startMachine(t, m, src)
	end := t0.Add(time.Hour)
	src.add(admin.EventRecord{Kind: "ban", Key: "192.0.2.1", Expires: &end})
	until(t, func() bool { return m.Stats().Pushed == 1 }, func() string { return fmt.Sprintf("Stats() = %+v, want 1 pushed", m.Stats()) })
	now.Store(t0.Add(30 * time.Second).UnixNano()) // the token is good for 90s more
	src.add(admin.EventRecord{Kind: "ban", Key: "192.0.2.2", Expires: &end})
	until(t, func() bool { return m.Stats().Pushed == 2 }, func() string { return fmt.Sprintf("Stats() = %+v, want 2 pushed", m.Stats()) })
	now.Store(t0.Add(61 * time.Second).UnixNano()) // 59s left: log in again
	src.add(admin.EventRecord{Kind: "ban", Key: "192.0.2.3", Expires: &end})
	until(t, func() bool { return m.Stats().Pushed == 3 }, func() string { return fmt.Sprintf("Stats() = %+v, want 3 pushed", m.Stats()) })
	mu.Lock()
	defer mu.Unlock()
	want := []string{"login", "Bearer tok1 192.0.2.1 1h0m0s", "Bearer tok1 192.0.2.2 59m30s", "login", "Bearer tok2 192.0.2.3 58m59s"}
	if !slices.Equal(log, want) {
		t.Errorf("requests = %q, want %q", log, want)
	}
}
