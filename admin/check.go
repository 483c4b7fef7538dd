package admin

import (
	"context"
	"net/netip"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/store"
)

// Kinds of CheckSource. Bans are the protector's own. An entry of a
// block list (Config.BlockLists, or the CrowdSec decisions, which feed
// the block list step as the list named "crowdsec") is one CheckSource of
// kind SourceBlockList, with the list's name in List, the matching entry
// in Entry and no Ban.
const (
	SourceBan       = "ban"        // the ban on the address's counting key
	SourceRangeBan  = "range_ban"  // a range ban containing the address
	SourceBlockList = "block_list" // an entry of a block list
)

// CheckReport is what protectctl check shows about one address: every
// source that would refuse it, and whether a safe network passes it
// before any of them is asked. It is part of protectctl's stable -json
// schema.
type CheckReport struct {
	Addr string `json:"addr"`
	// Safe reports that SafeNetworks pass the address (in every protector
	// checked) before any source is asked: nothing refuses it.
	Safe bool `json:"safe"`
	// SafeNetworks are the entries of SafeNetworks that contain it; []
	// when none.
	SafeNetworks []string `json:"safe_networks"`
	// Refused reports that some source refuses the address and no safe
	// network passes it first: what protectctl check exits 1 for.
	Refused bool `json:"refused"`
	// Sources are the sources that hold the address, in the order the
	// pipeline asks them; [] when none.
	Sources []CheckSource `json:"sources"`
}

// CheckSource is one source that would refuse an address.
type CheckSource struct {
	// Kind is SourceBan, SourceRangeBan or SourceBlockList.
	Kind string `json:"kind"`
	// List names where the entry is: the ban list's BanNamespace, or a
	// block list's name.
	List string `json:"list"`
	// Entry is what matched: the banned key or range, or the list's entry.
	Entry  string `json:"entry"`
	Reason string `json:"reason"`
	// Permanent, Expires and SecondsLeft say how long the source holds
	// the address: Expires and SecondsLeft are null when it is permanent
	// (a list entry holds until the list drops it: permanent).
	Permanent   bool       `json:"permanent"`
	Expires     *time.Time `json:"expires"`
	SecondsLeft *int64     `json:"seconds_left"`
	// Ban is the ban itself, for the two ban kinds; null otherwise.
	Ban *BanRecord `json:"ban"`
}

// banSource is the CheckSource of a ban.
func banSource(kind string, r *BanRecord) CheckSource {
	return CheckSource{Kind: kind, List: r.BanNamespace, Entry: r.Key, Reason: r.Reason,
		Permanent: r.Permanent, Expires: r.Expires, SecondsLeft: r.SecondsLeft, Ban: r}
}

// listSource is the CheckSource of a block list entry: permanent unless
// the list says when the entry leaves it (a CrowdSec decision's end).
func listSource(m protect.ListMatch, now time.Time) CheckSource {
	src := CheckSource{Kind: SourceBlockList, List: m.List, Entry: m.Entry.String(), Reason: m.Note, Permanent: m.Expires.IsZero()}
	if m.Entry.IsSingleIP() {
		src.Entry = m.Entry.Addr().String()
	}
	if !src.Permanent {
		exp := m.Expires.UTC()
		left := ceilSeconds(max(0, m.Expires.Sub(now)))
		src.Expires, src.SecondsLeft = &exp, &left
	}
	return src
}

// Check reports every source of a's protector that would refuse addr:
// the ban on its key, the range bans containing it, the block list
// entries that hold it (Protector.BlockListMatches); and whether
// SafeNetworks pass it first. It changes nothing.
func (a *Admin) Check(ctx context.Context, addr netip.Addr) (CheckReport, error) {
	addr = addr.Unmap().WithZone("")
	in, err := a.Inspect(ctx, addr.String())
	if err != nil {
		return CheckReport{}, err
	}
	rep := CheckReport{Addr: addr.String(), Safe: in.Safe, SafeNetworks: a.safeNetworks(addr), Sources: []CheckSource{}}
	if in.Ban != nil {
		rep.Sources = append(rep.Sources, banSource(SourceBan, in.Ban))
	}
	for i := range in.RangeBans {
		rep.Sources = append(rep.Sources, banSource(SourceRangeBan, &in.RangeBans[i]))
	}
	// Block lists (CrowdSec's decisions among them) are asked here, after
	// the bans, as step 3 of the pipeline asks them: each list whose set
	// holds addr is one more CheckSource of kind SourceBlockList.
	now := a.p.Config().Clock()
	for _, m := range a.p.BlockListMatches(addr) {
		rep.Sources = append(rep.Sources, listSource(m, now))
	}
	rep.Refused = !rep.Safe && len(rep.Sources) > 0
	return rep, nil
}

// safeNetworks lists the entries of SafeNetworks that contain addr.
func (a *Admin) safeNetworks(addr netip.Addr) []string {
	out := []string{}
	for _, s := range a.p.Config().SafeNetworks {
		if p, err := netip.ParsePrefix(s); err == nil && p.Contains(addr) {
			out = append(out, s)
		} else if b, err := netip.ParseAddr(s); err == nil && b.Unmap() == addr {
			out = append(out, s)
		}
	}
	return out
}

// ProtectorRecord describes one protector of a service, as protectctl
// protectors shows it. It is part of protectctl's stable -json schema.
type ProtectorRecord struct {
	Name         string `json:"name"`
	Namespace    string `json:"namespace"`
	BanNamespace string `json:"ban_namespace"`
	DryRun       bool   `json:"dry_run"`
	// Published reports that Limits are what the store holds as published
	// under Namespace; false: the protector's own settings, for nothing
	// is published there yet.
	Published bool         `json:"published"`
	Limits    LimitsRecord `json:"limits"`
}

// LimitsRecord is store.Limits in the -json schema, durations in
// milliseconds.
type LimitsRecord struct {
	MaxRequests      int64   `json:"max_requests"`
	TTLMS            int64   `json:"ttl_ms"`
	BanLimit         int64   `json:"ban_limit"`
	BanDurationMS    int64   `json:"ban_duration_ms"`
	BanFactor        float64 `json:"ban_factor"`
	MaxBanDurationMS int64   `json:"max_ban_duration_ms"`
	OffenseWindowMS  int64   `json:"offense_window_ms"`
}

// ProtectorRecord describes a's protector and the limits published for
// its namespace.
func (a *Admin) ProtectorRecord(ctx context.Context) (ProtectorRecord, error) {
	cfg := a.p.Config()
	lim := store.Limits{MaxRequests: cfg.MaxRequests, TTL: cfg.TTL, BanLimit: cfg.BanLimit, BanDuration: cfg.BanDuration,
		BanFactor: cfg.BanFactor, MaxBanDuration: cfg.MaxBanDuration, OffenseWindow: cfg.OffenseWindow}
	pub, ok, err := cfg.Store.Published(ctx, cfg.Namespace)
	if err != nil {
		return ProtectorRecord{}, err
	}
	if ok {
		lim = pub
	}
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	return ProtectorRecord{Name: cfg.Name, Namespace: cfg.Namespace, BanNamespace: cfg.BanNamespace, DryRun: cfg.DryRun, Published: ok,
		Limits: LimitsRecord{MaxRequests: lim.MaxRequests, TTLMS: ms(lim.TTL), BanLimit: lim.BanLimit, BanDurationMS: ms(lim.BanDuration),
			BanFactor: lim.BanFactor, MaxBanDurationMS: ms(lim.MaxBanDuration), OffenseWindowMS: ms(lim.OffenseWindow)}}, nil
}
