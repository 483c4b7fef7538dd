package memstore

// The store names, unqualified, and the names the tests of the memory store
// had in package protect: the tests read as the code they test.

import (
	"bufio"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/httpprotect/protect/internal/testclock"
	"github.com/httpprotect/protect/store"
)

type (
	Ban             = store.Ban
	BanFilter       = store.BanFilter
	BanHolder       = store.BanHolder
	BanPager        = store.BanPager
	Circuit         = store.Circuit
	CircuitStore    = store.CircuitStore
	DeadlineSpace   = store.DeadlineSpace
	Key             = store.Key
	KeyState        = store.KeyState
	LimitOutcome    = store.LimitOutcome
	LimitState      = store.LimitState
	LimitUsage      = store.LimitUsage
	Limits          = store.Limits
	LocalSpace      = store.LocalSpace
	MalformedError  = store.MalformedError
	Plan            = store.Plan
	PlanLimit       = store.PlanLimit
	PlanResult      = store.PlanResult
	Quota           = store.Quota
	QuotaPeriod     = store.QuotaPeriod
	RangeBanCounter = store.RangeBanCounter
	RangeEntry      = store.RangeEntry
	RangeSet        = store.RangeSet
	Rate            = store.Rate
	Result          = store.Result
	Scope           = store.Scope
	SetupChecker    = store.SetupChecker
	SetupWarning    = store.SetupWarning
	Source          = store.Source
	Space           = store.Space
	MemoryStore     = Store
	MemoryOptions   = Options
	fakeClock       = testclock.Clock
)

var (
	BanLength           = store.BanLength
	BanResult           = store.BanResult
	CheckBan            = store.CheckBan
	CheckTakePlan       = store.CheckTakePlan
	ConsumerKey         = store.ConsumerKey
	ExplainError        = store.ExplainError
	GCRASplit           = store.GCRASplit
	LimitsDiffer        = store.LimitsDiffer
	NewPlan             = store.NewPlan
	NewRangeSet         = store.NewRangeSet
	ParseKey            = store.ParseKey
	ParsePrefix         = store.ParsePrefix
	ParseQuotaPeriod    = store.ParseQuotaPeriod
	QuoteMalformed      = store.QuoteMalformed
	UnmapPrefix         = store.UnmapPrefix
	Daily               = store.Daily
	ErrCostTooHigh      = store.ErrCostTooHigh
	ErrEmptyKey         = store.ErrEmptyKey
	ErrLimitsDiffer     = store.ErrLimitsDiffer
	ErrMalformed        = store.ErrMalformed
	ErrNotAcknowledged  = store.ErrNotAcknowledged
	ErrPlan             = store.ErrPlan
	ErrStoreUnavailable = store.ErrStoreUnavailable
	Hourly              = store.Hourly
	MaxDuration         = store.MaxDuration
	MaxMalformedText    = store.MaxMalformedText
	MaxPlanLimits       = store.MaxPlanLimits
	MaxReasonLen        = store.MaxReasonLen
	Monthly             = store.Monthly
	SourceAuto          = store.SourceAuto
	SourceManual        = store.SourceManual
	NewMemoryStore      = New
	OpenMemoryStore     = Open
	newFakeClock        = testclock.New
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// mustPlan is NewPlan for plans a test knows to be good.
func mustPlan(t testing.TB, name string, limits ...PlanLimit) *Plan {
	t.Helper()
	p, err := NewPlan(name, limits...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// crashed runs the test called name again in a child process with env
// set to a state file's path; the child opens the file, calls child
// with its space of allowScope, syncs the file, says "written" and
// waits. crashed kills it then (SIGKILL: no Close), as a crash would,
// opens the file and returns its space of allowScope.
func crashed(t *testing.T, name, env string, child func(t *testing.T, sp Space)) Space {
	t.Helper()
	if path := os.Getenv(env); path != "" {
		s, sp := openAllowScope(t, path)
		child(t, sp)
		if err := s.journal.sync(); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("written\n")
		select {} // killed here
	}
	path := filepath.Join(t.TempDir(), "protect.db")
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$")
	cmd.Env = append(os.Environ(), env+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "written" {
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	_, sp := openAllowScope(t, path)
	return sp
}

// openAllowScope opens the state file path, closed in t.Cleanup, and
// returns it and its space of allowScope.
func openAllowScope(t *testing.T, path string) (*MemoryStore, Space) {
	t.Helper()
	s, err := Open(Options{Path: path, Logger: discardLogger()})
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	sp, err := s.Space(allowScope)
	if err != nil {
		t.Fatal(err)
	}
	return s, sp
}
