package admin

import (
	"fmt"
	"testing"
	"time"

	"github.com/httpprotect/protect"
)

// InspectPlans shows each stored limit of a consumer, and what is left of
// it under each plan given; with one plan, that plan's untouched limits
// too.
func TestInspectPlans(t *testing.T) {
	clk := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p, err := protect.New(protect.Config{Clock: func() time.Time { return clk }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	free, _ := protect.NewPlan("free", protect.Rate{Name: "burst", Limit: 1, Period: time.Minute, Burst: 5}, protect.Quota{Name: "monthly", Limit: 100, Period: protect.Monthly})
	pro, _ := protect.NewPlan("pro", protect.Rate{Name: "burst", Limit: 10, Period: time.Minute, Burst: 20}, protect.Quota{Name: "daily", Limit: 50, Period: protect.Daily})
	for range 3 {
		if d, _ := p.VerifyConsumer(t.Context(), "acme", free); d.Status != protect.Allowed {
			t.Fatalf("VerifyConsumer(acme, free) = %v, want allowed", d.Status)
		}
	}
	a := New(p)
	in, err := a.InspectPlans(t.Context(), "consumer:acme", map[string]*protect.Plan{"free": free, "pro": pro})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%+v", in.Limits)
	// burst: a 3-minute backlog; free has 2 of 5 left, pro (6s a token,
	// 120s deep) none. monthly: only free has it.
	want := "[{Name:burst Kind:rate Period: Window: Used:0 ResetMS:180000 Stored:true Left:[{Plan:free Limit:5 Left:2} {Plan:pro Limit:20 Left:0}]} " +
		"{Name:monthly Kind:quota Period:monthly Window:2026-11 Used:3 ResetMS:129600000 Stored:true Left:[{Plan:free Limit:100 Left:97}]}]"
	if got != want {
		t.Fatalf("InspectPlans(consumer:acme, free and pro).Limits =\n%s\nwant\n%s", got, want)
	}
	in, err = a.InspectPlans(t.Context(), "consumer:acme", map[string]*protect.Plan{"pro": pro})
	if err != nil || len(in.Limits) != 3 || in.Limits[1].Name != "daily" || in.Limits[1].Stored || in.Limits[1].Left[0].Left != 50 {
		t.Fatalf("InspectPlans(consumer:acme, pro alone).Limits = %+v, %v; want 3, daily unstored with 50 left", in.Limits, err)
	}
	in, err = a.Inspect(t.Context(), "consumer:globex")
	if err != nil || in.Limits == nil || len(in.Limits) != 0 {
		t.Fatalf("Inspect(consumer:globex).Limits = %#v, %v; want empty, not nil", in.Limits, err)
	}
}
