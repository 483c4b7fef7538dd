package memstore

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// Under pressure the memory store evicts the plan state that is worth
// least: a flood of fresh consumers does not evict a customer's month of
// usage (which would hand it that usage again).
func TestPlanEvictionKeepsUsage(t *testing.T) {
	clk := newFakeClock()
	s := NewMemoryStore(MemoryOptions{MaxKeys: 64, Shards: 1, Clock: clk.Now, SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	sp := memSpaceFor(t, s, "ns:", testLimits())
	plan := mustPlan(t, "pro", Quota{Name: "monthly", Limit: 1000, Period: Monthly})
	consume := func(id string) PlanResult {
		t.Helper()
		r, err := sp.TakePlan(t.Context(), Key{Name: id}, netip.Addr{}, plan, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for range 50 {
		consume("acme")
	}
	for i := range 1000 {
		consume(fmt.Sprintf("flood-%d", i))
	}
	if r := consume("acme"); !r.Charged || r.Limits[0].Remaining != 949 {
		t.Fatalf("TakePlan(acme) after a flood of 1000 consumers in a store of 64 = %+v; want charged, 949 left", r)
	}
}

// A plan's charge writes each limit into the slot decide found for it,
// unless making room for a new limit came first: room is made by
// dropping the slots of other plans that are over, which moves the rest
// within the entry, or by a larger entry. Either way every kept limit is
// charged in its own slot, on every request, and the new one in its own.
func TestPlanChargeAfterMakingRoom(t *testing.T) {
	monthly := Quota{Name: "monthly", Limit: 1000, Period: Monthly}
	daily := Quota{Name: "daily", Limit: 100, Period: Daily}
	hourly := Quota{Name: "hourly", Limit: 50, Period: Hourly}
	burst := Rate{Name: "burst", Limit: 10, Period: time.Second} // over within a second of the requests below
	minute := Rate{Name: "minute", Limit: 60, Period: time.Minute}
	for _, tc := range []struct {
		name   string
		before []PlanLimit   // the plan of the key's first requests
		wait   time.Duration // after them
		after  []PlanLimit   // the plan of the ones after
		want   []string      // what Inspect lists then: a quota as name=count, a rate as its name
	}{
		{"new limit ahead of a kept one, entry full", []PlanLimit{monthly}, 0, []PlanLimit{hourly, monthly}, []string{"hourly=2", "monthly=5"}},
		{"new limit ahead of a kept one, an over slot dropped in place", []PlanLimit{burst, monthly}, 2 * time.Second, []PlanLimit{hourly, monthly}, []string{"hourly=2", "monthly=5"}},
		{"new limit ahead of a kept one, a live slot kept", []PlanLimit{burst, monthly}, 0, []PlanLimit{hourly, monthly}, []string{"burst", "hourly=2", "monthly=5"}},
		{"new limits around kept ones", []PlanLimit{daily, monthly}, 0, []PlanLimit{hourly, daily, minute, monthly}, []string{"daily=5", "hourly=2", "minute", "monthly=5"}},
		{"new limit behind kept ones", []PlanLimit{monthly, daily}, 0, []PlanLimit{daily, monthly, hourly}, []string{"daily=5", "hourly=2", "monthly=5"}},
		{"kept ones reordered behind a new one, an over slot dropped between them", []PlanLimit{daily, burst, monthly}, 2 * time.Second, []PlanLimit{hourly, monthly, daily}, []string{"daily=5", "hourly=2", "monthly=5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, clk := newTestMemoryStore(t, MemoryOptions{})
			sp := memSpaceFor(t, s, "ns:", testLimits())
			k := Key{Name: "cus_moved"}
			before, after := mustPlan(t, "before", tc.before...), mustPlan(t, "after", tc.after...)
			used := map[string]int64{}
			take := func(plan *Plan) {
				t.Helper()
				r, err := sp.TakePlan(t.Context(), k, netip.Addr{}, plan, 1, false)
				if err != nil || !r.Charged {
					t.Fatalf("TakePlan(%s, %s) = %+v, %v; want charged", k, plan.Name(), r, err)
				}
				for i := range plan.Len() {
					l := plan.Spec(i)
					if l.Quota == 0 {
						continue
					}
					used[l.Name]++
					if got, want := r.Limits[i].Remaining, l.Limit-used[l.Name]; got != want {
						t.Fatalf("TakePlan(%s, %s) after %d of %s = %d left, want %d", k, plan.Name(), used[l.Name], l.Name, got, want)
					}
				}
			}
			for range 3 {
				take(before)
			}
			clk.Advance(tc.wait)
			for range 2 {
				take(after)
			}
			st, err := sp.Inspect(t.Context(), k)
			if err != nil {
				t.Fatalf("Inspect(%s) = %v", k, err)
			}
			var got []string
			for _, u := range st.Usage {
				if u.Period == 0 {
					got = append(got, u.Name)
				} else {
					got = append(got, fmt.Sprintf("%s=%d", u.Name, u.Used))
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Inspect(%s).Usage = %v, want %v", k, got, tc.want)
			}
		})
	}
}
