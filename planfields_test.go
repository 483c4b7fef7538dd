package protect

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// The Decision stays 264 bytes: each word of it is zeroed and copied on
// every request, so a field added unpacked shows here first.
func TestDecisionSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the figure is for 64-bit platforms")
	}
	if got := unsafe.Sizeof(Decision{}); got != 264 {
		t.Fatalf("unsafe.Sizeof(Decision{}) = %d, want 264", got)
	}
}

// A plan's fields and problem body come from the plan the Decision
// points to, on every path that decides under a plan: a
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
