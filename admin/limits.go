package admin

import (
	"slices"
	"strings"
	"time"

	"github.com/httpprotect/protect"
)

// LimitRecord is one plan limit of a key, as protectctl inspect shows it:
// what the store holds, and what is left of it under the plans given. It
// is part of protectctl's stable -json schema. The zero value describes
// nothing (a rate with no name).
type LimitRecord struct {
	Name string `json:"name"`
	// Kind is "rate" or "quota".
	Kind string `json:"kind"`
	// Period is a quota's window, "hourly", "daily" or "monthly"; "" for
	// a rate.
	Period string `json:"period"`
	// Window names a quota's current window ("2026-11"); "" for a rate.
	Window string `json:"window"`
	// Used is what a quota counted in its window; 0 for a rate.
	Used int64 `json:"used"`
	// ResetMS is, for a quota, the time until its window ends; for a
	// rate, its backlog: the time until its bucket is full again. In
	// milliseconds, rounded up.
	ResetMS int64 `json:"reset_ms"`
	// Stored is false for a limit of the one plan given that the store
	// holds nothing for: it is whole.
	Stored bool `json:"stored"`
	// Left says what is left under each plan given that has this limit;
	// [] when none.
	Left []PlanLeft `json:"left"`
}

// PlanLeft is what is left of a limit under one plan. The zero value is
// nothing left of nothing.
type PlanLeft struct {
	Plan string `json:"plan"`
	// Limit is the plan's number for the limit: a rate's Burst, a quota's
	// Limit.
	Limit int64 `json:"limit"`
	// Left is how many requests of cost 1 the limit admits now.
	Left int64 `json:"left"`
}

// limitRecords converts stored limits, with what is left under plans.
func limitRecords(usage []protect.LimitUsage, plans map[string]*protect.Plan) []LimitRecord {
	out := make([]LimitRecord, 0, len(usage))
	for _, u := range usage {
		out = append(out, record(u, true, plans))
	}
	if len(plans) == 1 {
		for _, p := range plans {
			for _, l := range p.Limits() {
				u := usageOf(l)
				if !slices.ContainsFunc(usage, func(s protect.LimitUsage) bool { return s.Name == u.Name && s.Period == u.Period }) {
					out = append(out, record(u, false, plans))
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b LimitRecord) int {
		return strings.Compare(a.Name+"\x00"+a.Period, b.Name+"\x00"+b.Period)
	})
	return out
}

// usageOf is the usage of a limit nothing was charged to.
func usageOf(l protect.PlanLimit) protect.LimitUsage {
	switch l := l.(type) {
	case protect.Rate:
		return protect.LimitUsage{Name: l.Name}
	case protect.Quota:
		return protect.LimitUsage{Name: l.Name, Period: l.Period}
	}
	return protect.LimitUsage{}
}

func record(u protect.LimitUsage, stored bool, plans map[string]*protect.Plan) LimitRecord {
	r := LimitRecord{Name: u.Name, Kind: "rate", Window: u.Window, Used: u.Used, Stored: stored, Left: []PlanLeft{},
		ResetMS: int64((u.Reset + time.Millisecond - 1) / time.Millisecond)}
	if u.Period != 0 {
		r.Kind, r.Period = "quota", u.Period.String()
	}
	for name, p := range plans {
		left, ok := p.Left(u)
		if !ok {
			continue
		}
		r.Left = append(r.Left, PlanLeft{Plan: name, Limit: capacity(p, u), Left: left})
	}
	slices.SortFunc(r.Left, func(a, b PlanLeft) int { return strings.Compare(a.Plan, b.Plan) })
	return r
}

// capacity is the number p holds for the limit u names.
func capacity(p *protect.Plan, u protect.LimitUsage) int64 {
	for _, l := range p.Limits() {
		switch l := l.(type) {
		case protect.Rate:
			if u.Period == 0 && l.Name == u.Name {
				return l.Burst
			}
		case protect.Quota:
			if u.Period == l.Period && l.Name == u.Name {
				return l.Limit
			}
		}
	}
	return 0
}

// WithPlans returns the stored limits of recs (as an Inspection reports
// them) with what is left of each under plans, as InspectPlans would
// have said: for a client of the admin API, whose service reports usage
// without knowing the client's plans file. A rate's backlog comes back in
// whole milliseconds, so what is left of it may differ by a request at
// the edge of a token.
func WithPlans(recs []LimitRecord, plans map[string]*protect.Plan) []LimitRecord {
	usage := make([]protect.LimitUsage, 0, len(recs))
	for _, r := range recs {
		if !r.Stored {
			continue
		}
		u := protect.LimitUsage{Name: r.Name, Window: r.Window, Used: r.Used, Reset: time.Duration(r.ResetMS) * time.Millisecond}
		if r.Kind == "quota" {
			q, err := protect.ParseQuotaPeriod(r.Period)
			if err != nil {
				continue // a period this version does not know: no plan has it
			}
			u.Period = q
		}
		usage = append(usage, u)
	}
	return limitRecords(usage, plans)
}
