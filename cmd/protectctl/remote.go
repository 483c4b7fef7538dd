package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// backend is where protectctl's commands run: an admin.Service over
// protectors on the store (-redis), or a running service's admin API
// (-server). Both answer in the same records, which protectctl prints the
// same way.
type backend interface {
	Protectors(ctx context.Context) ([]admin.ProtectorRecord, error)
	Bans(ctx context.Context, f admin.Filter) ([]admin.BanRecord, error)
	Ban(ctx context.Context, targets []string, opt protect.BanOptions) ([]admin.BanRecord, error)
	Lift(ctx context.Context, o admin.LiftOptions) ([]admin.BanRecord, error)
	Inspect(ctx context.Context, target string, plans map[string]*protect.Plan) (admin.Inspection, error)
	Explain(ctx context.Context, peer string, header map[string][]string) (admin.Explanation, error)
	Check(ctx context.Context, addr netip.Addr) (admin.CheckReport, error)
	Events(ctx context.Context, since string, limit int) ([]admin.EventRecord, error)
	Allow(ctx context.Context, targets []string, o admin.AllowOptions) (admin.AllowResult, error)
	Allows(ctx context.Context) ([]admin.BanRecord, error)
	Disallow(ctx context.Context, targets []string) ([]admin.BanRecord, error)
}

// remote is a running service's admin API (admin.Handler), at base.
type remote struct {
	base   string // http://host:port, or http://unix for a socket
	shown  string // the URL as given, for messages
	token  string
	ns     string
	client *http.Client
}

// newRemote parses the -server URL: http://host:port, https://host:port
// or unix:/path (unix:///path too).
func newRemote(raw, token, ns string) (*remote, error) {
	r := &remote{shown: raw, token: token, ns: ns}
	tr := &http.Transport{ResponseHeaderTimeout: time.Minute}
	if path, ok := strings.CutPrefix(raw, "unix:"); ok {
		path = strings.TrimPrefix(path, "//")
		if path == "" {
			return nil, usagef("-server %q: want unix:/path/to/socket", raw)
		}
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}
		r.base = "http://unix"
	} else {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usagef("-server %q: want http://host:port, https://host:port or unix:/path", raw)
		}
		r.base = strings.TrimSuffix(u.Scheme+"://"+u.Host+u.Path, "/")
	}
	r.client = &http.Client{Transport: tr}
	return r, nil
}

// do sends one request and decodes the answer into out: a record when
// the status is want, else the problem.
func (r *remote) do(ctx context.Context, method, path string, q url.Values, body any, want int, out any) error {
	if r.ns != "" {
		q.Set("namespace", r.ns)
	}
	u := r.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	res, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("admin API %s: %w\n  check -server or HTTP_PROTECT_ADMIN_URL, and that the service serves its admin API there", r.shown, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("admin API %s: %w", r.shown, err)
	}
	if res.StatusCode == want {
		if recs, ok := out.(*[]admin.EventRecord); ok { // JSON lines
			return decodeLines(data, recs, r.shown)
		}
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("admin API %s: %s %s: not a record of the admin API: %w", r.shown, method, path, err)
		}
		return nil
	}
	var p admin.Problem
	if json.Unmarshal(data, &p) != nil || p.Code == "" {
		return fmt.Errorf("admin API %s: %s %s = %s, not the admin API's answer", r.shown, method, path, res.Status)
	}
	if recs, ok := out.(*[]admin.BanRecord); ok && len(p.Done) > 0 {
		*recs = p.Done // what a ban or lift did before it failed, shown as here
	}
	return remoteError(r.shown, &p)
}

// remoteError makes a problem the error protectctl reports: the text the
// service's admin package wrote, and an exit status as if the command
// had run here (2 for what the operator typed, 1 otherwise). A bad or
// wide target wraps protect's error again, so that it reads and exits as
// a target checked here.
func remoteError(shown string, p *admin.Problem) error {
	switch p.Code {
	case admin.CodeBadTarget:
		return fmt.Errorf("%w%s", protect.ErrBadTarget, trimPrefix(p.Detail, protect.ErrBadTarget))
	case admin.CodeWideTarget:
		return fmt.Errorf("%w%s", protect.ErrWideTarget, trimPrefix(p.Detail, protect.ErrWideTarget))
	case admin.CodeBadRequest, admin.CodeNoTarget, admin.CodeUnknownNamespace:
		return usageError{p}
	case admin.CodeCursorGone:
		return fmt.Errorf("admin API %s: %s: %w", shown, p.Detail, admin.ErrCursorGone)
	case admin.CodeUnauthorized:
		return fmt.Errorf("admin API %s: %s\n  check -token or HTTP_PROTECT_ADMIN_TOKEN", shown, p.Detail)
	}
	return fmt.Errorf("admin API %s: %s (%s)", shown, p.Detail, p.Code)
}

// trimPrefix is detail without the text of err it starts with, which
// %w puts back.
func trimPrefix(detail string, err error) string {
	if s, ok := strings.CutPrefix(detail, err.Error()); ok {
		return s
	}
	return ": " + detail
}

func (r *remote) Protectors(ctx context.Context) ([]admin.ProtectorRecord, error) {
	var out []admin.ProtectorRecord
	return out, r.do(ctx, "GET", "/v1/protectors", url.Values{}, nil, http.StatusOK, &out)
}

func (r *remote) Bans(ctx context.Context, f admin.Filter) ([]admin.BanRecord, error) {
	q := url.Values{}
	if f.Within.IsValid() {
		q.Set("within", f.Within.String())
	}
	if f.Source != "" {
		q.Set("source", string(f.Source))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out []admin.BanRecord
	return out, r.do(ctx, "GET", "/v1/bans", q, nil, http.StatusOK, &out)
}

func (r *remote) Ban(ctx context.Context, targets []string, opt protect.BanOptions) ([]admin.BanRecord, error) {
	req := admin.BanRequest{Targets: targets, Permanent: opt.Permanent, Reason: opt.Reason, By: opt.By, Force: opt.Force}
	if opt.For != 0 {
		req.For = opt.For.String()
	}
	var out []admin.BanRecord
	return out, r.do(ctx, "POST", "/v1/bans", url.Values{}, req, http.StatusCreated, &out)
}

func (r *remote) Lift(ctx context.Context, o admin.LiftOptions) ([]admin.BanRecord, error) {
	q := url.Values{"target": o.Targets}
	if o.All {
		q.Set("all", "true")
	}
	if o.Force {
		q.Set("force", "true")
	}
	if o.By != "" {
		q.Set("by", o.By)
	}
	var out []admin.BanRecord
	return out, r.do(ctx, "DELETE", "/v1/bans", q, nil, http.StatusOK, &out)
}

// Inspect asks the service, which knows no plans file; what is left under
// plans is worked out here from the usage it reports.
func (r *remote) Inspect(ctx context.Context, target string, plans map[string]*protect.Plan) (admin.Inspection, error) {
	var in admin.Inspection
	if err := r.do(ctx, "GET", "/v1/inspect", url.Values{"target": {target}}, nil, http.StatusOK, &in); err != nil {
		return in, err
	}
	if plans != nil {
		in.Limits = admin.WithPlans(in.Limits, plans)
		for i := range in.Protectors {
			in.Protectors[i].Limits = admin.WithPlans(in.Protectors[i].Limits, plans)
		}
	}
	return in, nil
}

func (r *remote) Explain(ctx context.Context, peer string, header map[string][]string) (admin.Explanation, error) {
	q := url.Values{"remote": {peer}}
	for name, values := range header {
		for _, v := range values {
			q.Add("header", name+": "+v)
		}
	}
	var ex admin.Explanation
	return ex, r.do(ctx, "GET", "/v1/explain", q, nil, http.StatusOK, &ex)
}

func (r *remote) Check(ctx context.Context, addr netip.Addr) (admin.CheckReport, error) {
	var rep admin.CheckReport
	return rep, r.do(ctx, "GET", "/v1/check", url.Values{"addr": {addr.String()}}, nil, http.StatusOK, &rep)
}

// errRefused is check's answer when something refuses the address: exit
// 1, with the report on stdout and nothing more on stderr.
var errRefused = errors.New("refused")

func (r *remote) Events(ctx context.Context, since string, limit int) ([]admin.EventRecord, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if since != "" {
		q.Set("since", since)
	}
	var out []admin.EventRecord
	return out, r.do(ctx, "GET", "/v1/events", q, nil, http.StatusOK, &out)
}

// decodeLines decodes the JSON lines of GET /v1/events.
func decodeLines(data []byte, recs *[]admin.EventRecord, shown string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var rec admin.EventRecord
		if err := dec.Decode(&rec); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("admin API %s: GET /v1/events: line %d is not an event record: %w", shown, len(*recs)+1, err)
		}
		*recs = append(*recs, rec)
	}
}
