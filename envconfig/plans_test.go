package envconfig

import (
	"errors"
	"strings"
	"testing"

	protect "github.com/httpprotect/protect"
)

func TestParsePlans(t *testing.T) {
	plans, err := ParsePlans([]byte(`{"pro":  {"rates":  [{"name": "burst", "limit": 10, "period": "1s", "burst": 20}],
            "quotas": [{"name": "monthly", "limit": 100000, "period": "monthly"}]},
   "free": {"rates":  [{"limit": 1, "period": "1s", "burst": 5}]},
   "day":  {"rates":  [{"limit": 1000, "period": "1d"}]}}`))
	if err != nil || len(plans) != 3 {
		t.Fatalf("ParsePlans(pro, free, day) = %v, %v; want 3 plans", plans, err)
	}
	for name, want := range map[string]string{
		"pro":  `pro: "burst";q=10;w=1, "monthly";q=100000;w=2592000`,
		"free": `free: "rate-1-per-1s";q=1;w=1`,
		"day":  `day: "rate-1000-per-1d";q=1000;w=86400`,
	} {
		if got := plans[name].String(); got != want {
			t.Errorf("ParsePlans(…)[%s].String() = %s, want %s", name, got, want)
		}
	}
	if r := plans["free"].Limits()[0].(protect.Rate); r.Burst != 5 {
		t.Errorf("ParsePlans(…)[free].Limits()[0].Burst = %d, want 5", r.Burst)
	}
	if plans, err := ParsePlans([]byte(" {} ")); err != nil || len(plans) != 0 {
		t.Errorf("ParsePlans({}) = %v, %v; want no plans", plans, err)
	}
	for _, c := range []struct{ in, want string }{
		{``, "want a JSON object"},
		{`[]`, "want a JSON object"},
		{`null`, "want a JSON object"},
		{`{"a": {"rates": [{"limit": 1.5, "period": "1s"}]}}`, `plan "a": rates[0]: "limit": 1.5: want a whole number`},
		{`{"a": {"rates": [{"limit": "10", "period": "1s"}]}}`, `"limit": "10": want a whole number`},
		{`{"a": {"rates": [{"limit": 1, "period": "1s", "x": 1}]}}`, `unknown field "x"`},
		{`{"a": {"rates": [{"limit": 1, "period": "1s", "limit": 2}]}}`, `field "limit" given twice`},
		{`{"a": {"rates": [{"limit": 1}]}}`, `"period" is missing`},
		{`{"a": {"rates": [{"period": "1s"}]}}`, `"limit" is missing`},
		{`{"a": {"rates": [{"limit": 1, "period": "fast"}]}}`, `"period": "fast": want a duration`},
		{`{"a": {"rates": [{"limit": 1, "period": 1}]}}`, `"period": 1: want a string`},
		{`{"a": {"rates": [{"limit": 0, "period": "1s"}]}}`, `plan "a": limit 1`},
		{`{"a": {"quotas": [{"limit": 1, "period": "weekly"}]}}`, `quotas[0]: "period": "weekly": want hourly, daily or monthly`},
		{`{"a": {"quotas": [{"limit": 1, "period": "daily", "burst": 3}]}}`, `unknown field "burst"`},
		{`{"a": {"limits": []}}`, `plan "a": unknown field "limits"`},
		{`{"a": {"rates": {}}}`, `"rates": {}: want a list`},
		{`{"a": {"rates": [{"limit": 1, "period": "1s"}]}, "a": {}}`, `plan "a" is defined twice`},
		{`{"a": {"rates": [{"limit": 1, "period": "1s"}]}} x`, "after the plans"},
		{`{"a": {}}`, `plan "a": no limits`},
		{`{"a": {"rates": [{"name": "Burst", "limit": 1, "period": "1s"}]}}`, `name "Burst"`},
	} {
		_, err := ParsePlans([]byte(c.in))
		if !errors.Is(err, protect.ErrPlan) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParsePlans(%s) = %v, want a protect.ErrPlan saying %q", c.in, err, c.want)
		}
	}
}

// A plans file is input: parsing never panics, and what parses is made of
// limits NewPlan accepts again as they are.
func FuzzParsePlans(f *testing.F) {
	for _, s := range []string{
		`{"pro": {"rates": [{"name": "burst", "limit": 10, "period": "1s", "burst": 20}], "quotas": [{"name": "monthly", "limit": 100000, "period": "monthly"}]}}`,
		`{"free": {"rates": [{"limit": 1, "period": "1s", "burst": 5}]}}`,
		`{"a": {"rates": [{"limit": 1, "period": "1d2h"}]}, "b": {"quotas": [{"limit": 9, "period": "HOURLY"}]}}`,
		`{"a": {"rates": [{"limit": 99999999999999999999, "period": "1s"}]}}`,
		`{"a": {"rates": [{"limit": 1, "period": "1ns"}]}}`,
		`{"a": {"rates": [{"limit": 1, "period": "1s", "burst": -1}]}}`,
		`{"a":{}}`, `{`, `{"a"`, `{"a":[`, `{} {}`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		plans, err := ParsePlans(data)
		if err != nil {
			if plans != nil || !errors.Is(err, protect.ErrPlan) {
				t.Fatalf("ParsePlans(%q) = %v, %v; want nil and an ErrPlan", data, plans, err)
			}
			return
		}
		for name, p := range plans {
			again, err := protect.NewPlan(name, p.Limits()...)
			if err != nil || again.String() != p.String() {
				t.Fatalf("NewPlan(%q, the limits of %s) = %v, %v; want the same plan", name, p, again, err)
			}
		}
	})
}
