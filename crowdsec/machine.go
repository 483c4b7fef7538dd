package crowdsec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/follow"
	"github.com/httpprotect/protect/internal/redact"
	"github.com/httpprotect/protect/store"
)

// MachineUserAgent is sent with every request of a Machine.
const MachineUserAgent = "protect-crowdsec-machine/1"

// Origin is the origin of the decisions a Machine pushes, and
// ScenarioPrefix begins their scenario ("protect/" and the ban's reason,
// or its source when it has none), so that a bouncer can select them or
// leave them out (origins=protect, scenarios_not_containing=protect/).
const (
	Origin         = "protect"
	ScenarioPrefix = "protect/"
)

// forever stands for a permanent ban, which a decision cannot express:
// ten years, as protectd's own Local API sends it.
const forever = 10 * 365 * 24 * time.Hour

// EventSource is where a Machine reads a ban list's events: an
// admin.Admin or admin.Service.
type EventSource interface {
	Events(ctx context.Context, since string, limit int) ([]admin.EventRecord, error)
}

// MachineOptions configure a Machine. URL, MachineID and Password are
// required; every other zero field takes the default in brackets.
type MachineOptions struct {
	// URL is the LAPI's base URL, such as http://127.0.0.1:8080.
	URL string
	// MachineID and Password are the machine's, from cscli machines add
	// NAME --password PW. The password is never logged.
	MachineID, Password string

	// Client makes the requests [a client with a timeout of 10s].
	Client *http.Client
	// Queue bounds the events read but not yet told [10,000].
	Queue int
	// Batch is the most events taken at once, and so the most alerts
	// of one push [100].
	Batch int
	// Poll is how often the journal is read while nothing is new [500ms].
	Poll time.Duration
	// MinBackoff and MaxBackoff bound the wait before a failed request
	// is tried again, doubling from the first to the second [1s, 1m].
	MinBackoff, MaxBackoff time.Duration
	// Logger logs failures and dropped events [slog.Default()].
	Logger *slog.Logger
	// Clock tells the time left of a ban, and of the token [time.Now].
	Clock func() time.Time
	// Wait waits d or until ctx is done, reporting whether d passed
	// [a timer]. Tests pass one that does not sleep.
	Wait func(ctx context.Context, d time.Duration) bool
}

// MachineStats counts what a Machine did.
type MachineStats struct {
	Pushed  uint64 // bans pushed as decisions the LAPI took
	Deleted uint64 // lifts and expiries whose deletion the LAPI took
	Skipped uint64 // events not told: CrowdSec's own, consumer keys, ended, unreadable
	Refused uint64 // events in requests the LAPI refused (4xx), dropped
	Dropped uint64 // events dropped from a full queue, never told
	Retries uint64 // requests tried again after a failure
	Lost    uint64 // journal reads that found their cursor trimmed away
	Logins  uint64 // logins the LAPI accepted
}

// A Machine tells a CrowdSec LAPI of a protector's bans, as a CrowdSec
// machine (a watcher, as crowdsec itself and cscli are) does of its own.
// Make one with NewMachine. It follows a ban list's journal
// (admin.Events) from the moment it starts; each ban of an address or
// range is pushed as an alert carrying its decision (POST /v1/alerts,
// several alerts a post), and each lift or expiry deletes the value's
// decisions of origin Origin (DELETE /v1/decisions). Every bouncer of
// that LAPI then enforces protect's bans, and cscli decisions list shows
// them. Bans that came from CrowdSec (FromCrowdSec) are never pushed.
//
// It logs in with POST /v1/watchers/login and its machine's password
// (registered with "cscli machines add NAME --password PW"), and again
// a minute before the token expires or when the LAPI answers 401. A push
// or a deletion that fails (no answer, a login refused, 401 again after
// a new login, 403, 429, 5xx) is tried again after a backoff that doubles
// up to MachineOptions.MaxBackoff; one the LAPI refuses (another 4xx) is
// dropped and counted. The journal is read into
// a bounded queue, whose oldest events are dropped while the LAPI is
// down: no request of the protector ever waits for the LAPI.
type Machine struct {
	o    MachineOptions
	base string // URL without a trailing slash
	log  *slog.Logger

	q *follow.Queue

	// Used by the pushing goroutine only.
	token    string
	expire   time.Time
	noOrigin bool // the LAPI's DELETE /v1/decisions takes no origin filter

	pushed, deleted, skipped, refused, retries, logins atomic.Uint64
}

// NewMachine checks o and returns a Machine of it. Its errors quote the
// URL (without a password) and never the password.
func NewMachine(o MachineOptions) (*Machine, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("crowdsec: URL %q: want http://host:port or https://host:port", redact.URL(o.URL))
	}
	if u.User != nil {
		return nil, fmt.Errorf("crowdsec: URL %q: the machine's password goes in Password, not in the URL", u.Redacted())
	}
	if o.MachineID == "" || o.Password == "" {
		return nil, errors.New("crowdsec: MachineID and Password are both required")
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(time.Minute, o.MinBackoff)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Wait == nil {
		o.Wait = follow.Wait
	}
	q := follow.New(follow.Options{Name: "crowdsec machine", Queue: o.Queue, Batch: o.Batch, Poll: o.Poll, Logger: o.Logger, Wait: o.Wait})
	return &Machine{o: o, base: strings.TrimRight(o.URL, "/"), log: o.Logger, q: q}, nil
}

// Stats returns the counts so far.
func (m *Machine) Stats() MachineStats {
	return MachineStats{Pushed: m.pushed.Load(), Deleted: m.deleted.Load(), Skipped: m.skipped.Load(),
		Refused: m.refused.Load(), Dropped: m.q.Dropped(), Retries: m.retries.Load(),
		Lost: m.q.Lost(), Logins: m.logins.Load()}
}

// Start follows src's journal from its end, as it reads it before
// returning, and tells the LAPI of its events until ctx is done; done is
// closed then. What is queued when ctx is done is not told. A source
// without a journal is admin.ErrNoJournal, and nothing is started.
func (m *Machine) Start(ctx context.Context, src EventSource) (done <-chan struct{}, err error) {
	return m.q.Start(ctx, src, m.push)
}

// FromCrowdSec reports whether e is a ban that came from CrowdSec, which
// a Machine never pushes back: one by the block list a Bouncer feeds
// (By is Name) or describing a block list entry (Source is
// protect.SourceList). A Bouncer's decisions are block list entries, not
// bans, so the journal does not hold them; this keeps it so for a ban
// written in their name.
func FromCrowdSec(e admin.EventRecord) bool {
	return e.By == Name || e.Source == string(protect.SourceList)
}

// A change is one request's worth of what an event tells the LAPI: a
// decision to add (ban) or the value whose decisions go.
type change struct {
	del     bool
	scope   string // Ip or Range
	value   string
	reason  string
	source  string
	expires *time.Time // nil: permanent
}

// changeOf is the change e asks for; false for an event the LAPI is not
// told of.
func changeOf(e admin.EventRecord) (change, bool) {
	if e.Malformed != "" || FromCrowdSec(e) {
		return change{}, false
	}
	var del bool
	switch e.Kind {
	case "ban":
	case "lift", "expire":
		del = true
	default:
		return change{}, false
	}
	k, err := store.ParseKey(e.Key)
	if err != nil || !k.Prefix.IsValid() {
		return change{}, false // a consumer's ban has no address
	}
	c := change{del: del, scope: "Range", value: k.String(), reason: e.Reason, source: e.Source, expires: e.Expires}
	if k.Prefix.IsSingleIP() {
		c.scope = "Ip"
	}
	return c, true
}

// push tells the LAPI of the queued events until ctx is done.
func (m *Machine) push(ctx context.Context) {
	for {
		batch, ok := m.q.Next(ctx)
		if !ok {
			return
		}
		var bans []change
		for _, e := range batch {
			c, ok := changeOf(e)
			if !ok {
				if e.Kind == "ban" || e.Kind == "lift" || e.Kind == "expire" {
					m.skipped.Add(1)
				}
				continue
			}
			if !c.del {
				bans = append(bans, c)
				continue
			}
			// Keep the journal's order: the bans before a deletion
			// are pushed before it.
			if !m.pushBans(ctx, bans) || !m.deleteValue(ctx, c) {
				return
			}
			bans = bans[:0]
		}
		if !m.pushBans(ctx, bans) {
			return
		}
	}
}

// An alert is an alert of the LAPI's API carrying one decision.
type alert struct {
	Scenario        string          `json:"scenario"`
	ScenarioHash    string          `json:"scenario_hash"`
	ScenarioVersion string          `json:"scenario_version"`
	Message         string          `json:"message"`
	EventsCount     int             `json:"events_count"`
	StartAt         string          `json:"start_at"`
	StopAt          string          `json:"stop_at"`
	Capacity        int             `json:"capacity"`
	Leakspeed       string          `json:"leakspeed"`
	Simulated       bool            `json:"simulated"`
	Remediation     bool            `json:"remediation"`
	Events          []struct{}      `json:"events"`
	Source          alertSource     `json:"source"`
	Decisions       []alertDecision `json:"decisions"`
}

type alertSource struct {
	Scope string `json:"scope"`
	Value string `json:"value"`
	IP    string `json:"ip,omitempty"`
	Range string `json:"range,omitempty"`
}

type alertDecision struct {
	Origin   string `json:"origin"`
	Type     string `json:"type"`
	Scope    string `json:"scope"`
	Value    string `json:"value"`
	Duration string `json:"duration"`
	Scenario string `json:"scenario"`
}

// scenario is the scenario of a ban's decision.
func scenario(c change) string {
	s := c.reason
	if s == "" {
		s = c.source
	}
	if s == "" {
		s = "ban"
	}
	return ScenarioPrefix + s
}

// timeLeft is what is left of ban c at now, rounded down to a second:
// ten years for a permanent ban, under a second for one over.
func timeLeft(c change, now time.Time) time.Duration {
	if c.expires == nil {
		return forever
	}
	return c.expires.Sub(now).Truncate(time.Second)
}

// alerts are the alerts of bans at now, each with its time left.
func alerts(bans []change, now time.Time) []alert {
	out := make([]alert, 0, len(bans))
	ts := now.UTC().Format(time.RFC3339)
	for _, c := range bans {
		sc := scenario(c)
		a := alert{
			Scenario: sc, Message: fmt.Sprintf("protect banned %s: %s", c.value, strings.TrimPrefix(sc, ScenarioPrefix)),
			EventsCount: 1, StartAt: ts, StopAt: ts, Leakspeed: "0", Remediation: true, Events: []struct{}{},
			Source:    alertSource{Scope: c.scope, Value: c.value},
			Decisions: []alertDecision{{Origin: Origin, Type: "ban", Scope: c.scope, Value: c.value, Duration: timeLeft(c, now).String(), Scenario: sc}},
		}
		if c.scope == "Ip" {
			a.Source.IP = c.value
		} else {
			a.Source.Range = c.value
		}
		out = append(out, a)
	}
	return out
}

// pushBans pushes bans in one post, trying again until the LAPI takes or
// refuses it; false when ctx is done first. A ban over before it is
// pushed is left out, and each try tells the time left at that try.
func (m *Machine) pushBans(ctx context.Context, bans []change) bool {
	return m.retry(ctx, len(bans), "push", func() (int, []byte, error) {
		now := m.o.Clock()
		live := bans[:0]
		for _, c := range bans {
			if timeLeft(c, now) >= time.Second {
				live = append(live, c)
			}
		}
		m.skipped.Add(uint64(len(bans) - len(live)))
		bans = live
		if len(bans) == 0 {
			return http.StatusOK, nil, nil
		}
		body, _ := json.Marshal(alerts(bans, now)) // alerts always marshal
		status, answer, err := m.do(ctx, http.MethodPost, "/v1/alerts", body)
		if err == nil && status/100 == 2 {
			m.pushed.Add(uint64(len(bans)))
		}
		return status, answer, err
	})
}

// deleteValue deletes the LAPI's ban decisions of c's value, of origin
// Origin where the LAPI filters deletions by origin.
func (m *Machine) deleteValue(ctx context.Context, c change) bool {
	return m.retry(ctx, 1, "delete", func() (int, []byte, error) {
		q := url.Values{"value": {c.value}, "type": {"ban"}}
		if !m.noOrigin {
			q.Set("origin", Origin)
		}
		status, answer, err := m.do(ctx, http.MethodDelete, "/v1/decisions?"+q.Encode(), nil)
		if err == nil && status == http.StatusBadRequest && !m.noOrigin && bytes.Contains(answer, []byte("origin")) {
			// CrowdSec before 1.5 filters deletions by scope, value,
			// type and address only.
			m.noOrigin = true
			m.log.Warn("crowdsec machine: this LAPI deletes decisions by value only: a lift in protect deletes CrowdSec's own ban decisions of the value too")
			q.Del("origin")
			status, answer, err = m.do(ctx, http.MethodDelete, "/v1/decisions?"+q.Encode(), nil)
		}
		if err == nil && status/100 == 2 {
			m.deleted.Add(1)
		}
		return status, answer, err
	})
}

// retry runs send until it succeeds or is refused, waiting a doubling
// backoff between failures; false when ctx is done first. n is the
// number of events in the request, counted when it is refused.
func (m *Machine) retry(ctx context.Context, n int, what string, send func() (int, []byte, error)) bool {
	backoff := m.o.MinBackoff
	relogged := false
	for {
		status, answer, err := send()
		switch {
		case err == nil && status/100 == 2:
			return true
		case err == nil && status == http.StatusUnauthorized && !relogged:
			// The token ran out or the LAPI restarted with a new secret:
			// log in again at once, once.
			m.token, relogged = "", true
			continue
		case err == nil && status/100 == 4 && status != http.StatusTooManyRequests && status != http.StatusUnauthorized && status != http.StatusForbidden:
			m.refused.Add(uint64(n))
			m.log.Warn("crowdsec machine: the LAPI refused a "+what+"; its events are dropped", "status", status, "events", n, "answer", snippet(answer))
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if err != nil {
			m.log.Warn("crowdsec machine: "+what+" failed", "err", err.Error(), "retry_in", backoff.String())
		} else {
			m.log.Warn("crowdsec machine: "+what+" failed", "status", status, "answer", snippet(answer), "retry_in", backoff.String())
		}
		if !m.o.Wait(ctx, backoff) {
			return false
		}
		m.retries.Add(1)
		backoff = min(2*backoff, m.o.MaxBackoff)
		relogged = false
	}
}

// snippet is the start of an answer, for a log line.
func snippet(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(bytes.TrimSpace(b))
}

// errLogin is wrapped by the error of a login the LAPI refused.
var errLogin = errors.New("the LAPI refused the machine's login (check the machine id and password: cscli machines list)")

// login gets a token, unless the one held is good for another minute.
func (m *Machine) login(ctx context.Context) error {
	if m.token != "" && m.o.Clock().Before(m.expire.Add(-time.Minute)) {
		return nil
	}
	m.token = ""
	body, _ := json.Marshal(struct {
		MachineID string   `json:"machine_id"`
		Password  string   `json:"password"`
		Scenarios []string `json:"scenarios"`
	}{m.o.MachineID, m.o.Password, []string{}})
	status, answer, err := m.send(ctx, http.MethodPost, "/v1/watchers/login", body, "")
	if err != nil {
		return fmt.Errorf("crowdsec: login: %w", err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("crowdsec: login as %q: status %d: %w", m.o.MachineID, status, errLogin)
	}
	var r struct {
		Token  string `json:"token"`
		Expire string `json:"expire"`
	}
	if err := json.Unmarshal(answer, &r); err != nil || r.Token == "" {
		if r.Token != "" { // it holds a token: never quoted
			return fmt.Errorf("crowdsec: login: an answer of %d bytes that does not parse", len(answer))
		}
		return fmt.Errorf("crowdsec: login: an answer without a token: %q", snippet(answer))
	}
	exp, err := time.Parse(time.RFC3339, r.Expire)
	if err != nil {
		exp = m.o.Clock().Add(time.Hour) // CrowdSec's default lifetime
	}
	m.token, m.expire = r.Token, exp
	m.logins.Add(1)
	return nil
}

// do sends a request with the token, logging in first when needed. A
// login that fails is the request's error.
func (m *Machine) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	if err := m.login(ctx); err != nil {
		return 0, nil, err
	}
	return m.send(ctx, method, path, body, m.token)
}

// send sends one request and returns its status and answer.
func (m *Machine) send(ctx context.Context, method, path string, body []byte, token string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, m.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", MachineUserAgent)
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := m.o.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10)) // so the connection is reused
	return res.StatusCode, answer, nil
}
