package admin

import (
	"net/http"
	"time"

	"github.com/httpprotect/protect"
)

// NowRecord is what GET /ui/now answers: a snapshot of each protector's
// counters, which the dashboard's "now" page differences second by
// second, and the keys refused most.
type NowRecord struct {
	Time       time.Time      `json:"time"`
	Statuses   []string       `json:"statuses"` // every status, in the order of protect.Status
	Protectors []ProtectorNow `json:"protectors"`
	Refused    []RefusedKey   `json:"refused"`
}

// ProtectorNow is one protector's counters in a NowRecord, from
// protect.Stats. The zero value is a protector that has decided nothing.
type ProtectorNow struct {
	Namespace    string `json:"namespace"`
	BanNamespace string `json:"ban_namespace"`
	OnStoreError string `json:"on_store_error"`
	// Decisions counts the requests decided since the protector started,
	// by status name.
	Decisions      map[string]uint64 `json:"decisions"`
	StoreCalls     uint64            `json:"store_calls"`
	StoreErrors    uint64            `json:"store_errors"`
	StoreTimeouts  uint64            `json:"store_timeouts"`
	StoreFailures  uint64            `json:"store_failures"`
	StoreMeanMS    float64           `json:"store_mean_ms"` // the mean latency of StoreCalls; 0 without any
	CircuitOpen    bool              `json:"circuit_open"`
	CircuitOpens   uint64            `json:"circuit_opens"`
	CircuitRejects uint64            `json:"circuit_rejected"`
	PendingBans    int               `json:"pending_bans"`
	RangeBans      int               `json:"range_bans"` // -1: the store keeps no count
	AutoBans       uint64            `json:"auto_bans"`
	ManualBans     uint64            `json:"manual_bans"`
	BansLifted     uint64            `json:"bans_lifted"`
	BlockLists     []BlockListNow    `json:"block_lists"`
}

// BlockListNow is one block list's state in a ProtectorNow. The zero
// value is an empty list whose last check failed.
type BlockListNow struct {
	Name    string `json:"name"`
	Entries int    `json:"entries"`
	Errors  uint64 `json:"errors"` // failed checks of its source
	Up      bool   `json:"up"`     // the last check succeeded
	// AgeSeconds is how long ago the source last confirmed the set in
	// force; -1 before it ever did.
	AgeSeconds int64 `json:"age_seconds"`
}

// statusCount is the number of protect.Status values: as many as Stats
// counts decisions of.
const statusCount = len(protect.Stats{}.Decisions)

// Now returns the NowRecord of ps at now, with the top keys of refused
// (nil: none).
func Now(now time.Time, refused *Refused, ps ...*protect.Protector) NowRecord {
	rec := NowRecord{Time: now.UTC(), Statuses: make([]string, statusCount), Protectors: []ProtectorNow{}, Refused: refused.Top(dashboardRefusedShown)}
	for i := range rec.Statuses {
		rec.Statuses[i] = protect.Status(i).String()
	}
	for _, p := range ps {
		st, cfg := p.Stats(), p.Config()
		pn := ProtectorNow{
			Namespace: cfg.Namespace, BanNamespace: cfg.BanNamespace, OnStoreError: st.OnStoreError.String(),
			Decisions:  make(map[string]uint64, statusCount),
			StoreCalls: st.StoreCalls, StoreErrors: st.StoreErrors, StoreTimeouts: st.StoreTimeouts, StoreFailures: st.StoreFailures,
			CircuitOpen: st.CircuitOpen, CircuitOpens: st.CircuitOpens, CircuitRejects: st.CircuitRejected,
			PendingBans: st.PendingBans, RangeBans: st.RangeBans,
			AutoBans: st.AutoBans, ManualBans: st.ManualBans, BansLifted: st.BansLifted,
			BlockLists: []BlockListNow{},
		}
		for i, n := range st.Decisions {
			pn.Decisions[protect.Status(i).String()] = n
		}
		if st.StoreCalls > 0 {
			pn.StoreMeanMS = float64(st.StoreLatency.Sum) / float64(st.StoreCalls) / float64(time.Millisecond)
		}
		for _, l := range st.BlockLists {
			age := int64(-1)
			if l.Age >= 0 {
				age = int64(l.Age / time.Second)
			}
			pn.BlockLists = append(pn.BlockLists, BlockListNow{Name: l.Name, Entries: l.Entries, Errors: l.Errors, Up: l.Up, AgeSeconds: age})
		}
		rec.Protectors = append(rec.Protectors, pn)
	}
	return rec
}

func (d *dashboard) now(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Now(d.cfg.Clock(), d.cfg.Refused, d.ps...))
}
