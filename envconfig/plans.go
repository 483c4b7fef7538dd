package envconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	protect "github.com/httpprotect/protect"
)

// ParsePlans reads a plans file: a JSON object of plans by name, each
// with "rates" and "quotas", as protectd and protectctl read it:
//
//	{"pro":  {"rates":  [{"name": "burst", "limit": 10, "period": "1s", "burst": 20}],
//	          "quotas": [{"name": "monthly", "limit": 100000, "period": "monthly"}]},
//	 "free": {"rates":  [{"limit": 1, "period": "1s", "burst": 5}]}}
//
// A rate's period is a duration ("1s", "15m", "1d"); a quota's is
// "hourly", "daily" or "monthly"; "name" and a rate's "burst" may be left
// out (see Rate and Quota). It is strict: an unknown field, a duplicate
// plan, a value of the wrong type or a bad limit is an error that wraps
// ErrPlan and quotes the plan, the field and the value. An empty object
// is no plans.
func ParsePlans(data []byte) (map[string]*protect.Plan, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: plans file: "+format, append([]any{protect.ErrPlan}, args...)...)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, bad("want a JSON object of plans by name (%s)", tokenOrErr(tok, err))
	}
	plans := make(map[string]*protect.Plan)
	for dec.More() {
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return nil, bad("want a plan name (%s)", tokenOrErr(tok, err))
		}
		if _, dup := plans[name]; dup {
			return nil, bad("plan %q is defined twice", name)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, bad("plan %q: %v", name, err)
		}
		limits, err := parsePlanLimits(raw)
		if err != nil {
			return nil, bad("plan %q: %w", name, err)
		}
		p, err := protect.NewPlan(name, limits...)
		if err != nil {
			return nil, err // it quotes the plan and the limit
		}
		plans[name] = p
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, bad("%v", err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		return nil, bad("unexpected %s after the plans", tokenOrErr(tok, err))
	}
	return plans, nil
}

func tokenOrErr(tok json.Token, err error) string {
	if err != nil {
		return err.Error()
	}
	if s, ok := tok.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(tok)
}

// parsePlanLimits reads one plan: {"rates": [...], "quotas": [...]}.
func parsePlanLimits(raw json.RawMessage) ([]protect.PlanLimit, error) {
	fields, err := jsonObject(raw, "rates", "quotas")
	if err != nil {
		return nil, err
	}
	var limits []protect.PlanLimit
	for _, kind := range []string{"rates", "quotas"} {
		v, ok := fields[kind]
		if !ok {
			continue
		}
		var list []json.RawMessage
		if err := strictDecode(v, &list); err != nil || list == nil {
			return nil, fmt.Errorf("%q: %s: want a list", kind, v)
		}
		for i, item := range list {
			l, err := parseLimit(kind, item)
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", kind, i, err)
			}
			limits = append(limits, l)
		}
	}
	return limits, nil
}

func parseLimit(kind string, raw json.RawMessage) (protect.PlanLimit, error) {
	allowed := []string{"name", "limit", "period", "burst"}
	if kind == "quotas" {
		allowed = allowed[:3]
	}
	fields, err := jsonObject(raw, allowed...)
	if err != nil {
		return nil, err
	}
	var name, period string
	var limit, burst int64
	if err := jsonField(fields, "name", &name); err != nil {
		return nil, err
	}
	if err := jsonField(fields, "period", &period); err != nil {
		return nil, err
	}
	if _, ok := fields["period"]; !ok {
		return nil, errors.New(`"period" is missing`)
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{{"limit", &limit}, {"burst", &burst}} {
		v, ok := fields[f.name]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %s: want a whole number", f.name, v)
		}
		*f.v = n
	}
	if _, ok := fields["limit"]; !ok {
		return nil, errors.New(`"limit" is missing`)
	}
	if kind == "quotas" {
		p, err := protect.ParseQuotaPeriod(period)
		if err != nil {
			return nil, fmt.Errorf(`"period": %q: want hourly, daily or monthly`, period)
		}
		return protect.Quota{Name: name, Limit: limit, Period: p}, nil
	}
	d, err := ParseDuration(period)
	if err != nil {
		return nil, fmt.Errorf(`"period": %q: want a duration such as 1s, 15m, 1d`, period)
	}
	return protect.Rate{Name: name, Limit: limit, Period: d, Burst: burst}, nil
}

// jsonObject reads a JSON object whose fields are all among allowed.
func jsonObject(raw json.RawMessage, allowed ...string) (map[string]json.RawMessage, error) {
	if err := checkDuplicates(raw); err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := strictDecode(raw, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("%s: want an object", truncate(raw))
	}
	for name := range fields {
		known := false
		for _, a := range allowed {
			known = known || name == a
		}
		if !known {
			return nil, fmt.Errorf("unknown field %q (want %q)", name, allowed)
		}
	}
	return fields, nil
}

// jsonField decodes the string field name of fields into dst, if present.
func jsonField(fields map[string]json.RawMessage, name string, dst *string) error {
	v, ok := fields[name]
	if !ok {
		return nil
	}
	if err := strictDecode(v, dst); err != nil {
		return fmt.Errorf("%q: %s: want a string", name, truncate(v))
	}
	return nil
}

// strictDecode decodes one JSON value and nothing after it; duplicate
// fields of an object are an error, not a silent "last one wins".
func strictDecode(raw json.RawMessage, v any) error {
	if err := checkDuplicates(raw); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data")
	}
	return nil
}

// checkDuplicates reports an object of raw's top level that names a field
// twice.
func checkDuplicates(raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		if seen[name] {
			return fmt.Errorf("field %q given twice", name)
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// truncate quotes a JSON value for an error, cut to a readable length.
func truncate(raw json.RawMessage) string {
	const max = 60
	s := string(bytes.TrimSpace(raw))
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// LoadPlans reads plans as HTTP_PROTECT_PLANS gives them: the JSON itself
// when the value starts with '{', and otherwise the path of a file that
// holds it, parsed by ParsePlans. protectd and protectctl both read the
// setting through it, so a value one accepts the other does too.
func LoadPlans(value string) (map[string]*protect.Plan, error) {
	data := []byte(value)
	if !strings.HasPrefix(value, "{") {
		var err error
		if data, err = os.ReadFile(value); err != nil {
			return nil, err
		}
	}
	return ParsePlans(data)
}
