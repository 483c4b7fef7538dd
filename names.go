package protect

import (
	"time"

	"github.com/httpprotect/protect/blocklist"
	"github.com/httpprotect/protect/internal/clientaddr"
	"github.com/httpprotect/protect/memstore"
	"github.com/httpprotect/protect/store"
)

// The names a service writes, from the packages that hold them: store
// (the store SPI), memstore (the memory store) and blocklist (lists fed
// in). Each is the same type or value as its name there, which documents
// it.

type (
	// Store is store.Store: where counters, bans and plan states live.
	Store = store.Store
	// Key is store.Key: what one counter counts.
	Key = store.Key
	// Ban is store.Ban: one entry of the ban list.
	Ban = store.Ban
	// BanFilter is store.BanFilter: which bans a listing selects.
	BanFilter = store.BanFilter
	// Source is store.Source: who wrote a ban.
	Source = store.Source
	// KeyState is store.KeyState: what admin.Admin.InspectKey reports of a key.
	KeyState = store.KeyState
	// Plan is store.Plan: limits a consumer is held to at once.
	Plan = store.Plan
	// PlanLimit is store.PlanLimit: a Rate or a Quota.
	PlanLimit = store.PlanLimit
	// Rate is store.Rate: a token bucket.
	Rate = store.Rate
	// Quota is store.Quota: a calendar quota.
	Quota = store.Quota
	// QuotaPeriod is store.QuotaPeriod: a quota's calendar window.
	QuotaPeriod = store.QuotaPeriod
	// LimitUsage is store.LimitUsage: what a store holds for one limit.
	LimitUsage = store.LimitUsage
)

const (
	// SourceAuto is store.SourceAuto: a ban the pipeline wrote.
	SourceAuto = store.SourceAuto
	// SourceManual is store.SourceManual: a ban an operator added.
	SourceManual = store.SourceManual

	// Hourly, Daily and Monthly are the periods of a Quota.
	Hourly  = store.Hourly
	Daily   = store.Daily
	Monthly = store.Monthly

	// MaxPlanLimits is store.MaxPlanLimits: the most limits of a Plan.
	MaxPlanLimits = store.MaxPlanLimits
	// MaxReasonLen is store.MaxReasonLen: the longest ban reason.
	MaxReasonLen = store.MaxReasonLen
	// MaxDuration is store.MaxDuration: the longest length protect
	// takes for a ban and for each duration of a Config.
	MaxDuration time.Duration = store.MaxDuration
)

var (
	// ErrPlan is store.ErrPlan, wrapped by every error of NewPlan.
	ErrPlan = store.ErrPlan
	// ErrCostTooHigh is store.ErrCostTooHigh: a request costs more
	// than a limit of its plan can ever hold.
	ErrCostTooHigh = store.ErrCostTooHigh
	// ErrStoreUnavailable is store.ErrStoreUnavailable: the circuit
	// breaker answered without calling the store.
	ErrStoreUnavailable = store.ErrStoreUnavailable
	// ErrMalformed is store.ErrMalformed: a record the store holds but
	// cannot read.
	ErrMalformed = store.ErrMalformed
)

// NewPlan is store.NewPlan: it checks a plan's limits once and returns
// the plan.
func NewPlan(name string, limits ...PlanLimit) (*Plan, error) {
	return store.NewPlan(name, limits...)
}

// ParseQuotaPeriod is store.ParseQuotaPeriod.
func ParseQuotaPeriod(s string) (QuotaPeriod, error) { return store.ParseQuotaPeriod(s) }

// ParseKey is store.ParseKey: a key as Key.String writes it.
func ParseKey(s string) (Key, error) { return store.ParseKey(s) }

// ConsumerKey is store.ConsumerKey: the key a consumer identifier is
// counted under.
func ConsumerKey(id string) Key { return store.ConsumerKey(id) }

// The memory store, from package memstore.
type (
	// MemoryStore is memstore.Store: the Store for one process.
	MemoryStore = memstore.Store
	// MemoryOptions is memstore.Options.
	MemoryOptions = memstore.Options
)

// ErrStateFileLocked is memstore.ErrStateFileLocked: another process
// holds the state file.
var ErrStateFileLocked = memstore.ErrStateFileLocked

// NewMemoryStore is memstore.New: a memory store, nothing kept on disk.
func NewMemoryStore(opt MemoryOptions) *MemoryStore { return memstore.New(opt) }

// OpenMemoryStore is memstore.Open: a memory store kept in the state
// file opt.Path.
func OpenMemoryStore(opt MemoryOptions) (*MemoryStore, error) { return memstore.Open(opt) }

// Block lists, from package blocklist.
type (
	// BlockList is blocklist.List: one list of networks to refuse.
	BlockList = blocklist.List
	// BlockSet is blocklist.Set: a list's networks, indexed.
	BlockSet = blocklist.Set
	// BlockEntry is blocklist.Entry: one network of a BlockSet.
	BlockEntry = blocklist.Entry
	// BlockSource is blocklist.Source: a list that keeps itself.
	BlockSource = blocklist.Source
	// BlockSetPointer is blocklist.SetPointer.
	BlockSetPointer = blocklist.SetPointer
	// BlockSourceStatuser is blocklist.Statuser.
	BlockSourceStatuser = blocklist.Statuser
	// BlockSourceStatus is blocklist.Status.
	BlockSourceStatus = blocklist.Status
	// BlockListStats is blocklist.Stats: one list's state in Stats.
	BlockListStats = blocklist.Stats
	// ListMatch is blocklist.Match: the entry of a list that holds an
	// address.
	ListMatch = blocklist.Match
	// Format is blocklist.Format: how a list's file is written.
	Format = blocklist.Format
)

// The formats of a BlockList, as blocklist names them.
const (
	FormatPlain    = blocklist.FormatPlain
	FormatNetset   = blocklist.FormatNetset
	FormatSpamhaus = blocklist.FormatSpamhaus
	FormatIPsum    = blocklist.FormatIPsum
)

// NewBlockSet is blocklist.NewSet.
func NewBlockSet(entries []BlockEntry) *BlockSet { return blocklist.NewSet(entries) }

// ParseFormat is blocklist.ParseFormat.
func ParseFormat(s string) (Format, error) { return blocklist.ParseFormat(s) }

// SourceList marks the Ban that describes a block list entry in a
// Blocked decision: it is not a ban record, and no store holds it.
const SourceList Source = "list"

// ErrUnknownClient is wrapped by every error that explains why a
// request's client address could not be determined. Such a request is
// refused with status Unknown: any input a client can craft to make
// resolution fail would otherwise let it escape the limiter.
var ErrUnknownClient = clientaddr.ErrUnknownClient
