package main

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/crowdsec"
	"github.com/httpprotect/protect/internal/crowdsectest"
)

const machinePassword = "hunter2-machine"

// The machine's id comes with its password and the LAPI's URL; an error
// names the variable and never quotes the password. A URL with a machine
// and no bouncer key pushes without pulling.
func TestCrowdsecMachineSettings(t *testing.T) {
	url := envCrowdsecURL + "=http://127.0.0.1:8080"
	id := envCrowdsecMachineID + "=protect"
	pw := envCrowdsecPassword + "=" + machinePassword
	for _, tc := range []struct {
		env []string
		err string
	}{
		{[]string{url, id, pw}, ""},
		{[]string{url, envCrowdsecKey + "=0123456789abcdef", id, pw}, ""},
		{[]string{url, id}, envCrowdsecPassword + " is needed with " + envCrowdsecMachineID + ": the machine's password, from cscli machines add protect --password PW"},
		{[]string{url, pw}, envCrowdsecPassword + " is set without " + envCrowdsecMachineID + ": set both, or neither"},
		{[]string{id, pw}, envCrowdsecMachineID + " is set without " + envCrowdsecURL + ": the LAPI protectd pushes its bans to"},
		{[]string{envCrowdsecURL + "=127.0.0.1:8080", id, pw},
			envCrowdsecURL + `="127.0.0.1:8080": crowdsec: URL "127.0.0.1:8080": want http://host:port or https://host:port`},
		{[]string{envCrowdsecURL + "=http://protect:" + machinePassword + "@127.0.0.1:8080", id, pw},
			envCrowdsecURL + `="http://protect:xxxxx@127.0.0.1:8080": crowdsec: URL "http://protect:xxxxx@127.0.0.1:8080": the machine's password goes in Password, not in the URL`},
	} {
		s, err := loadSinks(tc.env)
		if got := errText(err); got != tc.err {
			t.Errorf("loadSinks(%q) = error %q, want %q", tc.env, got, tc.err)
		}
		if err == nil && (s.machine == nil || s.machine.MachineID != "protect" || s.machine.Password != machinePassword) {
			t.Errorf("loadSinks(%q).machine = %+v, want machine protect with its password", tc.env, s.machine)
		}
	}
	// Push only: the bouncer needs no key then.
	s, err := loadSettings([]string{url, id, pw, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1"})
	if err != nil {
		t.Fatalf("loadSettings(URL, MACHINE_ID, PASSWORD) = %v, want no error", err)
	}
	if s.crowdsec != nil || s.sinks.machine == nil {
		t.Errorf("loadSettings(URL, MACHINE_ID, PASSWORD): bouncer %v, machine %v; want no bouncer and a machine", s.crowdsec, s.sinks.machine)
	}
	// Pull and push on one LAPI: the bouncer leaves out what the machine
	// pushed; pull alone, it keeps every decision.
	for _, tc := range []struct {
		env  []string
		skip bool
	}{
		{[]string{url, envCrowdsecKey + "=0123456789abcdef", id, pw}, true},
		{[]string{url, envCrowdsecKey + "=0123456789abcdef"}, false},
	} {
		s, err := loadSettings(append(tc.env, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1"))
		if err != nil || s.crowdsec == nil || s.crowdsec.SkipPushed != tc.skip {
			t.Errorf("loadSettings(%q) = bouncer %+v, %v; want SkipPushed %v", tc.env, s.crowdsec, err, tc.skip)
		}
	}
	// The bouncer still asks for its key with an interval.
	_, err = loadSettings([]string{url, id, pw, envCrowdsecInterval + "=5s", "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1"})
	if got, want := errText(err), envCrowdsecURL+" and "+envCrowdsecKey+": set both"; !strings.Contains(got, want) || strings.Contains(got, machinePassword) {
		t.Errorf("loadSettings(URL, MACHINE_ID, PASSWORD, INTERVAL) = error %q, want one with %q and no password", got, want)
	}
}

// protectDecisions are "scope value origin" of the LAPI's decisions, sorted.
func protectDecisions(t *testing.T, l *crowdsectest.LAPI) []string {
	t.Helper()
	var out []string
	for _, d := range l.Decisions(t) {
		out = append(out, d.Scope+" "+d.Value+" "+d.Origin)
	}
	slices.Sort(out)
	return out
}

// waitLAPI polls the LAPI until its decisions are want, failing after
// within.
func waitLAPI(t *testing.T, l *crowdsectest.LAPI, within time.Duration, want []string, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := protectDecisions(t, l)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: cscli decisions list = %q after %v, want %q", what, got, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// protectd as a machine of a real LAPI: a ban made through its admin API
// is a decision of cscli decisions list within 2s, a lift deletes it,
// and a decision it pulls from the same LAPI as a bouncer is not pushed
// back.
func TestCrowdsecMachineEndToEnd(t *testing.T) {
	l := crowdsectest.Start(t)
	id, pw := l.Machine(t)
	d := startDaemon(t, "HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1",
		envAdminListen+"=127.0.0.1:0", envAdminToken+"="+adminToken,
		envCrowdsecURL+"="+l.URL, envCrowdsecKey+"="+l.Bouncer(t), envCrowdsecInterval+"=1s",
		envCrowdsecMachineID+"="+id, envCrowdsecPassword+"="+pw)
	api := "http://" + adminAddr(t, d) + "/v1/bans"
	ban := func(target string) {
		t.Helper()
		req, _ := http.NewRequest("POST", api, strings.NewReader(`{"targets":["`+target+`"],"for":"1h","reason":"e2e"}`))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s %s = %d, want 201", api, target, res.StatusCode)
		}
	}

	ban("203.0.113.7")
	waitLAPI(t, l, 2*time.Second, []string{"Ip 203.0.113.7 protect"}, "after a ban")

	if code, body := adminDo(t, http.DefaultClient, "DELETE", api+"?target=203.0.113.7", "Bearer "+adminToken); code != 200 {
		t.Fatalf("DELETE %s?target=203.0.113.7 = %d %s, want 200", api, code, body)
	}
	waitLAPI(t, l, 10*time.Second, nil, "after the lift")

	// CrowdSec's own decision is pulled and enforced, and not pushed
	// back: once a later ban is in the LAPI, the journal before it has
	// been told, and the LAPI holds the one decision cscli made.
	l.Cscli(t, "decisions", "add", "--ip", "192.0.2.88", "--duration", "1h")
	eventually(t, d, "192.0.2.88", 403, "cscli decisions add --ip")
	ban("203.0.113.8")
	waitLAPI(t, l, 10*time.Second, []string{"Ip 192.0.2.88 cscli", "Ip 203.0.113.8 protect"}, "after a pulled decision and a ban")
}

// noJournal is an event source of a store that keeps no journal.
type noJournal struct{}

func (noJournal) Events(context.Context, string, int) ([]admin.EventRecord, error) {
	return nil, admin.ErrNoJournal
}

// A store without a journal stops protectd at start with the machine
// set, naming the variable.
func TestCrowdsecMachineNoJournal(t *testing.T) {
	o := crowdsec.MachineOptions{URL: "http://127.0.0.1:1", MachineID: "protect", Password: machinePassword}
	_, err := startMachine(t.Context(), o, noJournal{}, slog.New(slog.DiscardHandler))
	want := envCrowdsecMachineID + ": admin: the store keeps no journal of events: the machine pushes the journal's bans"
	if got := errText(err); got != want {
		t.Errorf("startMachine(no journal) = error %q, want %q", got, want)
	}
}
