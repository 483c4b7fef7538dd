package protect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

func mustPlan(t testing.TB, name string, limits ...PlanLimit) *Plan {
	t.Helper()
	p, err := NewPlan(name, limits...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func consume(t *testing.T, p *Protector, consumer string, plan *Plan) Decision {
	t.Helper()
	d, err := p.VerifyConsumer(t.Context(), consumer, plan)
	if err != nil || d.Err != nil {
		t.Fatalf("VerifyConsumer(%q) = %v, Err %v; want no error", consumer, err, d.Err)
	}
	return d
}

// headers returns the response fields d writes.
func headers(d Decision) http.Header {
	h := http.Header{}
	d.WriteHeaders(h)
	return h
}

func TestNewPlanDefaults(t *testing.T) {
	p := mustPlan(t, "pro", Rate{Limit: 5, Period: time.Second}, Rate{Limit: 1000, Period: 24 * time.Hour, Burst: 100},
		Quota{Limit: 100_000, Period: Monthly}, Quota{Name: "day", Limit: 5000, Period: Daily})
	want := []PlanLimit{
		Rate{Name: "rate-5-per-1s", Limit: 5, Period: time.Second, Burst: 5},
		Rate{Name: "rate-1000-per-1d", Limit: 1000, Period: 24 * time.Hour, Burst: 100},
		Quota{Name: "monthly", Limit: 100_000, Period: Monthly},
		Quota{Name: "day", Limit: 5000, Period: Daily},
	}
	if got := p.Limits(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Limits() = %v, want %v", got, want)
	}
	if got := p.Policy(); got != `"rate-5-per-1s";q=5;w=1, "rate-1000-per-1d";q=1000;w=86400, "monthly";q=100000;w=2592000, "day";q=5000;w=86400` {
		t.Fatalf("Policy() = %s, want the four limits, in order", got)
	}
	if p.Name() != "pro" || !strings.HasPrefix(p.String(), "pro: ") {
		t.Fatalf("Name() = %q, String() = %q; want \"pro\", \"pro: …\"", p.Name(), p.String())
	}
}

// A bad plan is an error that wraps ErrPlan and quotes the plan, the
// limit and the bad value.
func TestNewPlanErrors(t *testing.T) {
	many := make([]PlanLimit, MaxPlanLimits+1)
	for i := range many {
		many[i] = Rate{Name: fmt.Sprintf("r%d", i), Limit: 1, Period: time.Second}
	}
	for _, c := range []struct {
		name   string
		limits []PlanLimit
		want   []string // substrings of the error
	}{
		{"", []PlanLimit{Rate{Limit: 1, Period: time.Second}}, []string{`plan ""`, "needs a name"}},
		{"none", nil, []string{`plan "none"`, "no limits"}},
		{"zero-rate", []PlanLimit{Rate{}}, []string{`plan "zero-rate"`, "limit 1", "Limit 0"}},
		{"neg-limit", []PlanLimit{Rate{Name: "burst", Limit: -5, Period: time.Second}}, []string{`plan "neg-limit"`, `rate "burst"`, "Limit -5"}},
		{"zero-period", []PlanLimit{Rate{Limit: 5}}, []string{`plan "zero-period"`, "Period 0s"}},
		{"neg-period", []PlanLimit{Rate{Limit: 5, Period: -time.Second}}, []string{"Period -1s"}},
		{"nanos", []PlanLimit{Rate{Limit: 5, Period: 1500 * time.Nanosecond}}, []string{"Period 1.5µs", "microseconds"}},
		{"neg-burst", []PlanLimit{Rate{Limit: 5, Period: time.Second, Burst: -1}}, []string{"Burst -1"}},
		{"huge", []PlanLimit{Rate{Limit: 1 << 51, Period: time.Second}}, []string{"Limit 2251799813685248"}},
		{"deep", []PlanLimit{Rate{Limit: 1, Period: 50 * 365 * 24 * time.Hour, Burst: 3}}, []string{"deeper than 100 years"}},
		{"zero-quota", []PlanLimit{Quota{Name: "monthly", Period: Monthly}}, []string{`plan "zero-quota"`, `quota "monthly"`, "Limit 0"}},
		{"neg-quota", []PlanLimit{Quota{Limit: -1, Period: Daily}}, []string{"Limit -1"}},
		{"no-period", []PlanLimit{Quota{Limit: 10}}, []string{"Period QuotaPeriod(0)"}},
		{"bad-period", []PlanLimit{Quota{Limit: 10, Period: 9}}, []string{"Period QuotaPeriod(9)"}},
		{"dup", []PlanLimit{Rate{Name: "x", Limit: 1, Period: time.Second}, Quota{Name: "x", Limit: 1, Period: Daily}}, []string{`plan "dup"`, "limits 1 and 2", `"x"`}},
		{"dup-default", []PlanLimit{Quota{Limit: 1, Period: Daily}, Quota{Limit: 2, Period: Daily}}, []string{`"daily"`, "unique"}},
		{"upper", []PlanLimit{Rate{Name: "Burst", Limit: 1, Period: time.Second}}, []string{`name "Burst"`, "RFC 9651 key"}},
		{"digit", []PlanLimit{Rate{Name: "5-per-1s", Limit: 1, Period: time.Second}}, []string{`name "5-per-1s"`}},
		{"colon", []PlanLimit{Rate{Name: "a:b", Limit: 1, Period: time.Second}}, []string{`name "a:b"`}},
		{"long", []PlanLimit{Quota{Name: strings.Repeat("a", 65), Limit: 1, Period: Daily}}, []string{"at most 64"}},
		{"nil", []PlanLimit{nil}, []string{"not a Rate or a Quota"}},
		{"nil-ptr", []PlanLimit{(*Rate)(nil)}, []string{"not a Rate or a Quota"}},
		{"many", many, []string{`plan "many"`, "9 limits", "at most 8"}},
	} {
		p, err := NewPlan(c.name, c.limits...)
		if err == nil || p != nil || !errors.Is(err, ErrPlan) {
			t.Errorf("NewPlan(%q) = %v, %v; want an ErrPlan", c.name, p, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("NewPlan(%q) = %q, want it to say %q", c.name, err, w)
			}
		}
	}
	// Pointers to limits are limits too.
	if _, err := NewPlan("ptr", &Rate{Limit: 1, Period: time.Second}, &Quota{Limit: 1, Period: Hourly}); err != nil {
		t.Fatalf("NewPlan(ptr, &Rate, &Quota) = %v, want nil: pointers to limits are limits too", err)
	}
}

// The article's edges, with a fake clock: a full bucket of 5 gives
// exactly 5, the 6th is 429 with Retry-After: 1; half a token is not
// enough; a long pause refills to the capacity and no further.
func TestPlanBucketOfFive(t *testing.T) {
	p, clk := newTestProtector(t, Config{})
	plan := mustPlan(t, "default", Rate{Name: "default", Limit: 1, Period: time.Second, Burst: 5})
	burst := func(when string) {
		t.Helper()
		for i := int64(1); i <= 5; i++ {
			d := consume(t, p, "acme", plan)
			h := headers(d)
			if d.Status != Allowed || d.Remaining != 5-i || d.Policy != "default" || d.Limit != 1 || d.Window != time.Second ||
				h.Get("RateLimit-Policy") != `"default";q=1;w=1` || h.Get("RateLimit") != fmt.Sprintf(`"default";r=%d;t=%d`, 5-i, i) {
				t.Fatalf("%s: VerifyConsumer(acme) request %d = %v %+v, headers %v; want allowed, %d left, r=%d;t=%d", when, i, d.Status, d, h, 5-i, 5-i, i)
			}
		}
		d := consume(t, p, "acme", plan)
		h := headers(d)
		if d.Status != Limited || d.StatusCode() != 429 || d.RetryAfter != time.Second || d.Policy != "default" ||
			h.Get("Retry-After") != "1" || h.Get("RateLimit") != `"default";r=0;t=1` || h.Get("Cache-Control") != "no-store" {
			t.Fatalf("%s: VerifyConsumer(acme) request 6 = %v %+v, headers %v; want 429, Retry-After: 1", when, d.Status, d, h)
		}
	}
	burst("a full bucket")
	clk.Advance(500 * time.Millisecond)
	if d := consume(t, p, "acme", plan); d.Status != Limited || d.RetryAfter != 500*time.Millisecond || headers(d).Get("Retry-After") != "1" {
		t.Fatalf("VerifyConsumer(acme) half a token later = %v, retry after %v; want limited, 500ms (Retry-After: 1)", d.Status, d.RetryAfter)
	}
	clk.Advance(500 * time.Millisecond)
	if d := consume(t, p, "acme", plan); d.Status != Allowed || d.Remaining != 0 {
		t.Fatalf("VerifyConsumer(acme) a token later = %v, %d left; want allowed, 0 left", d.Status, d.Remaining)
	}
	clk.Advance(time.Hour)
	burst("after an hour's pause")
}

// Refused requests cost nothing: a client retrying every 40ms while
// refused is served exactly when its token is back.
func TestPlanRetryEvery40ms(t *testing.T) {
	p, clk := newTestProtector(t, Config{})
	plan := mustPlan(t, "one", Rate{Name: "one", Limit: 1, Period: time.Second})
	if d := consume(t, p, "acme", plan); d.Status != Allowed {
		t.Fatalf("VerifyConsumer(acme), the first = %v, want allowed", d.Status)
	}
	for i := 1; i <= 25; i++ {
		clk.Advance(40 * time.Millisecond)
		d := consume(t, p, "acme", plan)
		left := time.Second - time.Duration(i)*40*time.Millisecond
		switch {
		case i < 25 && (d.Status != Limited || d.RetryAfter != left || headers(d).Get("Retry-After") != "1"):
			t.Fatalf("VerifyConsumer(acme) retry %d (at %v) = %v, retry after %v; want limited, %v", i, time.Duration(i)*40*time.Millisecond, d.Status, d.RetryAfter, left)
		case i == 25 && d.Status != Allowed:
			t.Fatalf("VerifyConsumer(acme) retry 25, at 1s when the token is back = %v, want allowed", d.Status)
		}
	}
}

// keyTable stands in for an API's key table: Acme has two keys, one
// bucket.
var keyTable = map[string]string{"key_acme_1": "acme", "key_acme_2": "acme", "key_globex": "globex"}

// Acme over two keys and three addresses shares one bucket; Globex on the
// same address is unaffected.
func TestPlanAcmeSharesOneBucket(t *testing.T) {
	plan := mustPlan(t, "default", Rate{Name: "default", Limit: 1, Period: time.Second, Burst: 5})
	p, _ := newTestProtector(t, Config{ConsumerFunc: func(r *http.Request) (string, *Plan, bool) {
		c, ok := keyTable[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		return c, plan, ok
	}})
	send := func(key, peer string) Decision {
		r := request(peer)
		r.Header.Set("Authorization", "Bearer "+key)
		return verify(t, p, r)
	}
	peers := []string{"192.0.2.1:1000", "198.51.100.2:2000", "203.0.113.3:3000"}
	var got []string
	for i := range 7 {
		d := send([]string{"key_acme_1", "key_acme_2"}[i%2], peers[i%3])
		if d.Key != (Key{Name: "acme"}) {
			t.Fatalf("Verify(request %d).Key = %v, want the consumer acme", i, d.Key)
		}
		got = append(got, strconv.Itoa(d.StatusCode()))
	}
	if s := strings.Join(got, " "); s != "200 200 200 200 200 429 429" {
		t.Fatalf("Verify of acme over two keys and three addresses = %s, want 5 served, then 429", s)
	}
	if d := send("key_globex", peers[0]); d.Status != Allowed || d.Remaining != 4 || d.Addr != netip.MustParseAddr("192.0.2.1") {
		t.Fatalf("Verify(key_globex) on acme's address = %v, %d left from %v; want allowed with 4 left from 192.0.2.1", d.Status, d.Remaining, d.Addr)
	}
}

// A monthly quota refuses with Exhausted, quota_exceeded and a
// Retry-After to the first of next month, 00:00 UTC, and resets then.
// Quota refusals do not charge the rates; rate refusals do not charge the
// quota.
func TestPlanMonthlyQuota(t *testing.T) {
	p, clk := newTestProtector(t, Config{}) // 2026-11-29 12:00 UTC
	plan := mustPlan(t, "pro", Rate{Name: "burst", Limit: 1, Period: time.Second, Burst: 3}, Quota{Name: "monthly", Limit: 5, Period: Monthly})
	for i := range 3 {
		if d := consume(t, p, "acme", plan); d.Status != Allowed {
			t.Fatalf("VerifyConsumer(acme) request %d = %v, want allowed", i+1, d.Status)
		}
	}
	for range 4 { // the rate refuses; the quota keeps its 2
		d := consume(t, p, "acme", plan)
		if d.Status != Limited || d.Status.Code() != "rate_limited" || d.Policy != "burst" ||
			headers(d).Get("RateLimit") != `"burst";r=0;t=1, "monthly";r=2;t=129600` {
			t.Fatalf("VerifyConsumer(acme) past the burst = %v %s, RateLimit %q; want limited by burst, the quota keeping its 2", d.Status, d.Policy, headers(d).Get("RateLimit"))
		}
	}
	clk.Advance(3 * time.Second)
	for range 2 {
		consume(t, p, "acme", plan)
	}
	boundary := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range 4 { // the quota refuses; the bucket keeps its token
		d := consume(t, p, "acme", plan)
		w := httptest.NewRecorder()
		d.WriteResponse(w)
		want := boundary.Sub(clk.Now())
		if d.Status != Exhausted || d.StatusCode() != 429 || d.Policy != "monthly" || d.RetryAfter != want || d.Remaining != 0 || d.Limit != 5 ||
			w.Header().Get("Retry-After") != strconv.FormatInt(int64(want/time.Second), 10) ||
			!strings.Contains(w.Body.String(), `"code":"quota_exceeded"`) || !strings.Contains(w.Body.String(), `"policy":"monthly"`) ||
			w.Header().Get("RateLimit") != fmt.Sprintf(`"burst";r=1;t=2, "monthly";r=0;t=%d`, int64(want/time.Second)) {
			t.Fatalf("VerifyConsumer(acme) past the quota, %d = %v %s retry after %v, %v %s; want exhausted until %v", i, d.Status, d.Policy, d.RetryAfter, w.Header(), w.Body, boundary)
		}
	}
	clk.Advance(boundary.Sub(clk.Now()) - time.Microsecond)
	if d := consume(t, p, "acme", plan); d.Status != Exhausted || d.RetryAfter != time.Microsecond || headers(d).Get("Retry-After") != "1" {
		t.Fatalf("VerifyConsumer(acme) 1µs before the month's end = %v, retry after %v; want exhausted, 1µs (Retry-After: 1)", d.Status, d.RetryAfter)
	}
	clk.Advance(time.Microsecond)
	d := consume(t, p, "acme", plan)
	if d.Status != Allowed || headers(d).Get("RateLimit") != `"burst";r=2;t=1, "monthly";r=4;t=2678400` {
		t.Fatalf("VerifyConsumer(acme) on the first of the month = %v, RateLimit %q; want allowed, 4 left for 31 days", d.Status, headers(d).Get("RateLimit"))
	}
}

// 300 concurrent requests against a burst of 100: exactly 100 allowed.
func TestPlanConcurrentExact(t *testing.T) {
	p, _ := newTestProtector(t, Config{})
	plan := mustPlan(t, "hot", Rate{Limit: 100, Period: time.Hour})
	got := sendAll(t, 300, true, func(int) (Decision, error) { return p.VerifyConsumer(t.Context(), "acme", plan) })
	if got[Allowed] != 100 || got[Limited] != 200 || len(got) != 2 {
		t.Fatalf("VerifyConsumer(acme) × 300 concurrently = %v, want 100 allowed, 200 limited", got)
	}
}

// VerifyConsumerN: a cost takes that many tokens; one that does not fit
// charges nothing; one above the burst never fits; cost 0 asks without
// charging.
func TestVerifyConsumerNCosts(t *testing.T) {
	p, clk := newTestProtector(t, Config{})
	plan := mustPlan(t, "batch", Rate{Name: "burst", Limit: 1, Period: time.Second, Burst: 10}, Quota{Name: "daily", Limit: 100, Period: Daily})
	ctx := t.Context()
	for _, c := range []struct {
		cost   int64
		status Status
		left   int64
		retry  time.Duration
		err    error
	}{
		{4, Allowed, 6, 0, nil},
		{7, Limited, 6, time.Second, nil},
		{6, Allowed, 0, 0, nil},
		{0, Limited, 0, time.Second, nil},
		{11, Limited, 0, 0, ErrCostTooHigh},
		{101, Limited, 0, 0, ErrCostTooHigh}, // the burst and the quota both say never: the first decides
	} {
		d, err := p.VerifyConsumerN(ctx, "acme", plan, c.cost)
		if err != nil || d.Status != c.status || d.Remaining != c.left || d.RetryAfter != c.retry || !errors.Is(d.Err, c.err) || d.Policy != "burst" {
			t.Fatalf("VerifyConsumerN(acme, %d) = %v %+v, %v; want %v, %d left, retry after %v, err %v", c.cost, d.Status, d, err, c.status, c.left, c.retry, c.err)
		}
	}
	if d, _ := p.VerifyConsumerN(ctx, "acme", plan, 11); headers(d).Get("Retry-After") != "" || !strings.Contains(d.Err.Error(), `limit "burst" of plan "batch" holds 10`) {
		t.Fatalf("VerifyConsumerN(acme, 11): Retry-After %q, Err %v; want none, and an error quoting the limit", headers(d).Get("Retry-After"), d.Err)
	}
	clk.Advance(2 * time.Second)
	for range 3 { // cost 0 writes nothing
		if d, _ := p.VerifyConsumerN(ctx, "acme", plan, 0); d.Status != Allowed || d.Remaining != 2 {
			t.Fatalf("VerifyConsumerN(acme, 0) after 2s = %v, %d left; want allowed, 2 left", d.Status, d.Remaining)
		}
	}
	if d, err := p.VerifyConsumerN(ctx, "acme", plan, -1); err == nil || d.Status != Unavailable || !d.Refused() {
		t.Fatalf("VerifyConsumerN(acme, -1) = %v, %v; want unavailable, an error and a refusal", d.Status, err)
	}
	st, _ := p.inspect(ctx, Key{Name: "acme"})
	for _, u := range st.Usage {
		if u.Name == "daily" && u.Used != 10 {
			t.Fatalf("Inspect(acme) daily Used = %d, want 10: only the two served requests (4 + 6) count", u.Used)
		}
	}
}

// Unknown, no plan, banned consumers; and a consumer is never banned
// automatically however hard it hammers.
func TestVerifyConsumerPipeline(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 2, BanLimit: 3})
	plan := mustPlan(t, "p", Rate{Limit: 1, Period: time.Hour})
	ctx := t.Context()
	if d, err := p.VerifyConsumer(ctx, "", plan); err != nil || d.Status != Unknown || !errors.Is(d.Err, ErrUnknownClient) {
		t.Fatalf("VerifyConsumer(\"\") = %v, %v; want unknown, ErrUnknownClient", d.Status, d.Err)
	}
	for _, nilPlan := range []*Plan{nil, {}} {
		if d, err := p.VerifyConsumer(ctx, "sk_live_0123456789abcdefghij", nilPlan); err != nil || d.Status != Unknown || !d.Refused() ||
			strings.Contains(d.Err.Error(), "sk_live") {
			t.Fatalf("VerifyConsumer(sk_live_…, %v) = %v, %v; want unknown, the secret not quoted", nilPlan, d.Status, d.Err)
		}
	}
	for range 50 {
		if d := consume(t, p, "hammer", plan); d.Status == Banned {
			t.Fatal("VerifyConsumer(hammer) = banned, want never: consumers are not banned automatically")
		}
	}
	if _, err := p.Ban(ctx, "consumer:acme", BanOptions{Reason: "fraud"}); err != nil {
		t.Fatal(err)
	}
	d := consume(t, p, "acme", plan)
	if d.Status != Banned || d.StatusCode() != 403 || d.Ban.Reason != "fraud" || d.RetryAfter != time.Hour || headers(d).Get("RateLimit") != "" {
		t.Fatalf("VerifyConsumer(acme) after Ban(consumer:acme) = %v %+v, want banned 403 for fraud, 1h, no RateLimit", d.Status, d)
	}
	if _, err := p.Lift(ctx, "consumer:acme", "ops"); err != nil {
		t.Fatal(err)
	}
	if d := consume(t, p, "acme", plan); d.Status != Allowed {
		t.Fatalf("VerifyConsumer(acme) after the lift = %v, want allowed (the banned requests charged nothing)", d.Status)
	}
	// Secrets are hashed in the key, as ConsumerKey says.
	if d := consume(t, p, "sk_live_0123456789abcdefghij", plan); d.Key != ConsumerKey("sk_live_0123456789abcdefghij") || strings.Contains(d.Key.String(), "sk_") {
		t.Fatalf("VerifyConsumer(sk_live_…).Key = %v, want ConsumerKey's hash", d.Key)
	}
}

// ConsumerFunc: unknown addresses and safe networks first; ok false counts
// the address; KeyFunc with ConsumerFunc is a config error.
func TestConsumerFunc(t *testing.T) {
	plan := mustPlan(t, "p", Rate{Name: "burst", Limit: 1, Period: time.Hour, Burst: 2})
	p, _ := newTestProtector(t, Config{
		MaxRequests:    3,
		TrustedProxies: []string{"10.0.0.0/8"},
		SafeNetworks:   []string{"192.0.2.0/24"},
		ConsumerFunc: func(r *http.Request) (string, *Plan, bool) {
			c := r.Header.Get("X-Consumer")
			if c == "noplan" {
				return c, nil, true
			}
			return c, plan, c != ""
		},
	})
	withConsumer := func(r *http.Request, c string) *http.Request { r.Header.Set("X-Consumer", c); return r }
	if d := verify(t, p, withConsumer(request("10.0.0.1:5000", "garbage"), "acme")); d.Status != Unknown {
		t.Fatalf("Verify(10.0.0.1 forwarding garbage, acme) = %v, want unknown", d.Status)
	}
	if d := verify(t, p, withConsumer(request("192.0.2.7:5000"), "acme")); d.Status != Safe {
		t.Fatalf("Verify(192.0.2.7, a safe network, acme) = %v, want safe", d.Status)
	}
	if d := verify(t, p, withConsumer(request("198.51.100.1:5000"), "noplan")); d.Status != Unknown || !d.Refused() {
		t.Fatalf("Verify(198.51.100.1, noplan), a nil plan = %v refused %v, want unknown, refused", d.Status, d.Refused())
	}
	// Check decides without charging.
	for range 3 {
		if d, _ := p.Check(t.Context(), withConsumer(request("198.51.100.1:5000"), "acme")); d.Status != Allowed || d.Remaining != 2 || d.Policy != "burst" {
			t.Fatalf("Check(198.51.100.1, acme) = %v, %d left, policy %q; want allowed, 2 left, burst", d.Status, d.Remaining, d.Policy)
		}
	}
	for i, want := range []Status{Allowed, Allowed, Limited} {
		if d := verify(t, p, withConsumer(request("198.51.100.1:5000"), "acme")); d.Status != want || d.Key.Name != "acme" {
			t.Fatalf("Verify(198.51.100.1, acme) request %d = %v on %v, want %v on acme", i+1, d.Status, d.Key, want)
		}
	}
	for i, want := range []Status{Allowed, Allowed, Allowed, Limited} { // without a consumer: the stream limit of the address
		if d := verify(t, p, request("198.51.100.1:5000")); d.Status != want || d.Key.String() != "198.51.100.1" || d.Policy != "" {
			t.Fatalf("Verify(198.51.100.1) request %d = %v on %v, want %v on the address", i+1, d.Status, d.Key, want)
		}
	}
	_, err := New(Config{KeyFunc: func(*http.Request) (string, bool) { return "", false }, ConsumerFunc: func(*http.Request) (string, *Plan, bool) { return "", nil, false }})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "KeyFunc and ConsumerFunc") {
		t.Fatalf("New(KeyFunc and ConsumerFunc) = %v, want a config error naming both", err)
	}
	if _, err := New(Config{Plan: &Plan{}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("New(Plan: &Plan{}) = %v, want a config error", err)
	}
}

// Config.Plan on addresses: 5 per minute; the 6th request in a minute is
// 429 with Retry-After 12 (one token every 12s); a client that keeps
// sending through the refusals passes BanLimit and is banned, as it is
// without a plan.
func TestConfigPlanOnAddresses(t *testing.T) {
	plan := mustPlan(t, "login", Rate{Name: "login", Limit: 5, Period: time.Minute})
	p, clk := newTestProtector(t, Config{Plan: plan, BanLimit: 20})
	a := netip.MustParseAddr("203.0.113.9")
	ctx := t.Context()
	for i := int64(1); i <= 5; i++ {
		d, _ := p.VerifyAddr(ctx, a)
		if d.Status != Allowed || d.Count != i || d.Remaining != 5-i || headers(d).Get("RateLimit-Policy") != `"login";q=5;w=60` {
			t.Fatalf("VerifyAddr(%s) request %d = %v count %d, %d left, %v; want allowed, count %d, %d left, the login policy", a, i, d.Status, d.Count, d.Remaining, headers(d), i, 5-i)
		}
	}
	d, _ := p.VerifyAddr(ctx, a)
	if d.Status != Limited || d.RetryAfter != 12*time.Second || headers(d).Get("Retry-After") != "12" || d.Count != 6 {
		t.Fatalf("VerifyAddr(%s) request 6 = %v retry after %v, count %d; want limited for 12s, count 6", a, d.Status, d.RetryAfter, d.Count)
	}
	if d, _ := p.Check(ctx, request("203.0.113.9:1")); d.Status != Limited || d.Count != 6 {
		t.Fatalf("Check(203.0.113.9) = %v count %d, want limited, count 6: nothing counted", d.Status, d.Count)
	}
	clk.Advance(12 * time.Second) // past the stream's TTL of 10s: the stream starts over
	if d, _ := p.VerifyAddr(ctx, a); d.Status != Allowed || d.Count != 1 {
		t.Fatalf("VerifyAddr(%s) 12s later = %v count %d, want allowed, count 1", a, d.Status, d.Count)
	}
	for i := int64(2); i <= 20; i++ {
		if d, _ := p.VerifyAddr(ctx, a); d.Status != Limited || d.Count != i {
			t.Fatalf("VerifyAddr(%s) hammering, request %d = %v count %d; want limited, count %d", a, i, d.Status, d.Count, i)
		}
	}
	d, _ = p.VerifyAddr(ctx, a)
	if d.Status != Banned || d.Ban == nil || d.Ban.Source != SourceAuto || d.RetryAfter != time.Hour || d.Count != 21 {
		t.Fatalf("VerifyAddr(%s) request 21 = %v %+v, want an automatic ban of an hour", a, d.Status, d)
	}
	bans, _ := p.bans(ctx, BanFilter{})
	if len(bans) != 1 || bans[0].Key.String() != "203.0.113.9" {
		t.Fatalf("Bans() = %+v, want one, of 203.0.113.9", bans)
	}
	// Through Middleware too.
	h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, request("198.51.100.77:1"))
	if w.Code != 200 || w.Header().Get("RateLimit") != `"login";r=4;t=12` {
		t.Fatalf("Middleware.ServeHTTP(198.51.100.77) = %d %v, want 200 with RateLimit \"login\";r=4;t=12", w.Code, w.Header())
	}
}

// The RateLimit fields of a plan parse as RFC 9651 lists, an item per
// limit, with delta seconds.
func TestPlanHeadersAreStructuredFields(t *testing.T) {
	p, clk := newTestProtector(t, Config{})
	plan := mustPlan(t, "pro", Rate{Name: "burst", Limit: 10, Period: time.Second, Burst: 20},
		Rate{Name: "sustained", Limit: 1000, Period: time.Hour}, Quota{Name: "monthly", Limit: 100_000, Period: Monthly})
	consume(t, p, "acme", plan)
	clk.Advance(time.Second / 4)
	h := headers(consume(t, p, "acme", plan))
	policy, err := parseSFList(h.Get("RateLimit-Policy"))
	if err != nil || sfString(policy, "q", "w") != "[burst q=10 w=1 (2)][sustained q=1000 w=3600 (2)][monthly q=100000 w=2592000 (2)]" {
		t.Fatalf("parseSFList(RateLimit-Policy %q) = %v, %v; want burst, sustained and monthly", h.Get("RateLimit-Policy"), policy, err)
	}
	state, err := parseSFList(h.Get("RateLimit"))
	// burst: 2.5 tokens back of 2 taken → 19 left, full in 0.15s (t=1);
	// sustained: 998 left, full in 7.2s − 0.25s; monthly: 99998 left,
	// 36h less 0.25s to December.
	if err != nil || sfString(state, "r", "t") != "[burst r=19 t=1 (2)][sustained r=998 t=7 (2)][monthly r=99998 t=129600 (2)]" {
		t.Fatalf("parseSFList(RateLimit %q) = %v, %v; want burst r=19, sustained r=998, monthly r=99998", h.Get("RateLimit"), state, err)
	}
}

// A limit of more than 2^32-1 reports r=4294967295 in RateLimit, an
// understatement, until what it has left falls below; Decision.Remaining
// keeps the exact count.
func TestPlanRateLimitLeftStops(t *testing.T) {
	p, _ := newTestProtector(t, Config{})
	plan := mustPlan(t, "big", Quota{Name: "monthly", Limit: 1<<40 + 10, Period: Monthly}, Rate{Name: "small", Limit: 5, Period: time.Second})
	d := consume(t, p, "acme", plan)
	if got, want := headers(d).Get("RateLimit"), `"monthly";r=4294967295;t=129600, "small";r=4;t=1`; got != want {
		t.Fatalf("VerifyConsumer(acme) RateLimit = %q, want %q", got, want)
	}
	if d.Policy != "small" || d.Remaining != 4 {
		t.Fatalf("VerifyConsumer(acme) = %s with %d left, want small with 4", d.Policy, d.Remaining)
	}
	big := mustPlan(t, "big", Quota{Name: "monthly", Limit: 1<<40 + 10, Period: Monthly})
	if d := consume(t, p, "globex", big); d.Remaining != 1<<40+9 || headers(d).Get("RateLimit") != `"monthly";r=4294967295;t=129600` {
		t.Fatalf("VerifyConsumer(globex) = %d left, RateLimit %q; want %d and r=4294967295", d.Remaining, headers(d).Get("RateLimit"), int64(1<<40+9))
	}
}

// sfString formats parsed list members in order, parameters as given.
func sfString(items []sfItem, keys ...string) string {
	var b strings.Builder
	for _, it := range items {
		fmt.Fprintf(&b, "[%s", it.name)
		for _, k := range keys {
			if v, ok := it.params[k]; ok {
				fmt.Fprintf(&b, " %s=%d", k, v)
			}
		}
		fmt.Fprintf(&b, " (%d)]", len(it.params))
	}
	return b.String()
}

// Deciding a hot consumer allocates nothing, on a two-limit plan, with an
// identifier kept verbatim or one that is hashed (an address-shaped one).
func TestVerifyConsumerAllocs(t *testing.T) {
	p, _ := newTestProtector(t, Config{BanLimit: -1})
	plan := mustPlan(t, "two", Rate{Limit: 1 << 40, Period: time.Hour}, Quota{Limit: 1 << 40, Period: Monthly})
	ctx := t.Context()
	for _, id := range []string{"cus_alpha", "10.0.0.1", "sk_live_0123456789abcdefghij"} {
		p.VerifyConsumer(ctx, id, plan)
		if n := testing.AllocsPerRun(1000, func() { p.VerifyConsumer(ctx, id, plan) }); n != 0 {
			t.Errorf("VerifyConsumer(%q) allocates %v times per call, want 0", id, n)
		}
	}
}

// The Decision stays 256 bytes: each word of it is zeroed and copied on
// every request, so a field added unpacked shows here first.
func TestDecisionSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the figure is for 64-bit platforms")
	}
	if got := unsafe.Sizeof(Decision{}); got != 256 {
		t.Fatalf("unsafe.Sizeof(Decision{}) = %d, want 256", got)
	}
}

// A plan's fields and problem body come from the plan the Decision's hdr
// points to (hdr.plan), on every path that decides under a plan: a
// refusal of a rate, a cost no rate holds, a ban of the consumer (the
// policy alone), and the failure policies, where FailLocal's decision is
// the plan's and FailOpen's and FailClosed's count nothing.
func TestPlanFieldsOnEveryPath(t *testing.T) {
	plan := mustPlan(t, "pro", Rate{Name: "burst", Limit: 1, Period: time.Minute})
	const policy = `"burst";q=1;w=60`
	body := func(d Decision) (detail string, h http.Header) {
		w := httptest.NewRecorder()
		d.WriteResponse(w)
		var pb struct{ Detail string }
		if err := json.Unmarshal(w.Body.Bytes(), &pb); err != nil {
			t.Fatalf("json.Unmarshal(%q) = %v, want a problem body", w.Body.Bytes(), err)
		}
		return pb.Detail, w.Header()
	}

	p, _ := newTestProtector(t, Config{})
	consume(t, p, "acme", plan)
	d, _ := p.VerifyConsumer(t.Context(), "acme", plan)
	detail, h := body(d)
	if d.Status != Limited || detail != "Too many requests for this plan's rate. Retry after retry_after seconds." || h.Get("RateLimit-Policy") != policy || h.Get("RateLimit") != `"burst";r=0;t=60` {
		t.Fatalf("VerifyConsumer(acme) past its burst = %v, detail %q, fields %v; want limited, the plan's detail, policy %s and r=0;t=60", d.Status, detail, h, policy)
	}
	d, _ = p.VerifyConsumerN(t.Context(), "globex", plan, 2)
	if detail, _ := body(d); d.Status != Limited || detail != "This request costs more than this plan's rate ever allows at once." {
		t.Fatalf("VerifyConsumerN(globex, cost 2) = %v, detail %q; want limited, the plan's cost detail", d.Status, detail)
	}
	if _, err := p.Ban(t.Context(), ConsumerPrefix+"initech", BanOptions{}); err != nil {
		t.Fatalf("Ban(consumer:initech) = %v, want no error", err)
	}
	d, _ = p.VerifyConsumer(t.Context(), "initech", plan)
	if h := headers(d); d.Status != Banned || h.Get("RateLimit-Policy") != policy || h.Values("RateLimit") != nil {
		t.Fatalf("VerifyConsumer(initech) banned = %v, fields %v; want banned, policy %s alone", d.Status, h, policy)
	}

	for _, tt := range []struct {
		fp     FailurePolicy
		want   Status
		policy string // RateLimit-Policy
		r      string // RateLimit
	}{
		{FailLocal, Allowed, policy, `"burst";r=0;t=60`},
		{FailOpen, Allowed, "", ""},
		{FailClosed, Unavailable, "", ""},
	} {
		s := downStore{remoteStore{NewMemoryStore(MemoryOptions{})}, new(atomic.Bool)}
		t.Cleanup(func() { s.Close() })
		p, err := New(Config{Store: s, OnStoreError: tt.fp, Logger: discardLogger()})
		if err != nil {
			t.Fatalf("New(%v) = %v, want no error", tt.fp, err)
		}
		t.Cleanup(func() { p.Close() })
		s.down.Store(true)
		d, _ := p.VerifyConsumer(t.Context(), "acme", plan)
		if h := headers(d); d.Status != tt.want || d.Err == nil || h.Get("RateLimit-Policy") != tt.policy || h.Get("RateLimit") != tt.r {
			t.Errorf("VerifyConsumer(acme) with the store down, %v = %v (Err %v), fields %v; want %v, policy %q, RateLimit %q", tt.fp, d.Status, d.Err, h, tt.want, tt.policy, tt.r)
		}
	}
}

// BenchmarkVerifyConsumer measures VerifyConsumer on the memory store:
// one hot consumer and 10k consumers, under a plan of one Rate (the
// harness's project-plan) and of a Rate and a monthly Quota, from one
// goroutine (seq) and from GOMAXPROCS (par). Nothing is ever refused.
func BenchmarkVerifyConsumer(b *testing.B) {
	ctx := context.Background()
	plans := map[string]*Plan{
		"rate":       mustPlan(b, "bench", Rate{Name: "rate", Limit: 1 << 32, Period: time.Hour, Burst: 1 << 32}),
		"rate+quota": mustPlan(b, "bench2", Rate{Name: "rate", Limit: 1 << 32, Period: time.Hour}, Quota{Name: "monthly", Limit: 1 << 40, Period: Monthly}),
	}
	for _, planName := range []string{"rate", "rate+quota"} {
		plan := plans[planName]
		for _, n := range []int{1, 10_000} {
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("cus_%d", i)
			}
			keys := "hot"
			if n > 1 {
				keys = fmt.Sprintf("keys=%d", n)
			}
			for _, par := range []bool{false, true} {
				mode := "seq"
				if par {
					mode = "par"
				}
				b.Run(planName+"/"+keys+"/"+mode, func(b *testing.B) {
					p, err := New(Config{BanLimit: -1, OnStoreError: FailOpen, Logger: discardLogger()})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { p.Close() })
					for _, id := range ids {
						p.VerifyConsumer(ctx, id, plan)
					}
					b.ReportAllocs()
					b.ResetTimer()
					if !par {
						i := 0
						for b.Loop() {
							if d, _ := p.VerifyConsumer(ctx, ids[i], plan); d.Refused() {
								b.Fatalf("VerifyConsumer(%q) = %v, want allowed", ids[i], d.Status)
							}
							if i++; i == n {
								i = 0
							}
						}
						return
					}
					var seq atomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						i := int(seq.Add(7919)) % n
						for pb.Next() {
							p.VerifyConsumer(ctx, ids[i], plan)
							if i++; i == n {
								i = 0
							}
						}
					})
				})
			}
		}
	}
}

// Every plan a protector meets keeps its field values' slot: a service
// that alternates between as many plans as there are slots allocates
// nothing, whatever the hash seed puts where; one plan more makes its
// values on each decision.
func TestPlanFieldsKeepTheirSlot(t *testing.T) {
	p, _ := newTestProtector(t, Config{BanLimit: -1})
	ctx := t.Context()
	var plans []*Plan
	for i := range len(p.planFields.slots) + 1 {
		plans = append(plans, mustPlan(t, fmt.Sprintf("p%d", i), Rate{Limit: 1 << 40, Period: time.Hour}))
	}
	kept, extra := plans[:len(plans)-1], plans[len(plans)-1]
	for _, plan := range kept {
		p.VerifyConsumer(ctx, "cus_alpha", plan)
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		p.VerifyConsumer(ctx, "cus_alpha", kept[i%len(kept)])
		i++
	}); n != 0 {
		t.Errorf("VerifyConsumer over %d plans allocates %v times per call, want 0", len(kept), n)
	}
	if n := testing.AllocsPerRun(100, func() { p.VerifyConsumer(ctx, "cus_alpha", extra) }); n != 1 {
		t.Errorf("VerifyConsumer under plan %d of %d slots allocates %v times per call, want 1", len(plans), len(kept), n)
	}
	if d, _ := p.VerifyConsumer(ctx, "cus_alpha", extra); d.hdr == nil || d.hdr.plan != extra || d.hdr.name != extra.Spec(0).Name {
		t.Errorf("VerifyConsumer(plan %d).hdr = %+v, want the plan's own values", len(plans), d.hdr)
	}
}
