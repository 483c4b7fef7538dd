package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/clientaddr"
	"github.com/httpprotect/protect/store"
)

// An Admin administers one protector's bans. The zero value is not usable;
// call New.
type Admin struct {
	p   *protect.Protector
	now func() time.Time
	res clientaddr.Resolver // p's, for Explain
}

// New returns an Admin for p. Times left are measured with p's clock.
func New(p *protect.Protector) *Admin {
	c := p.Config()
	trusted, _ := clientaddr.ParseNetList(c.TrustedProxies) // protect.New checked them
	return &Admin{p: p, now: c.Clock, res: clientaddr.NewResolver(trusted, c.ProxyHeader, c.ProxyCount, c.TrustUnixSocket)}
}

// Protector returns the protector a administers.
func (a *Admin) Protector() *protect.Protector { return a.p }

// BanRecord is one ban as protectctl shows it.
type BanRecord struct {
	Key         string     `json:"key"`
	Range       bool       `json:"range"`
	Reason      string     `json:"reason"`
	Source      string     `json:"source"`
	By          string     `json:"by"`
	Created     time.Time  `json:"created"`
	Expires     *time.Time `json:"expires"`      // null: permanent
	SecondsLeft *int64     `json:"seconds_left"` // null: permanent; rounded up
	Permanent   bool       `json:"permanent"`
	Offense     int        `json:"offense"`
	// BanNamespace is the ban list that holds the ban (Config.BanNamespace);
	// "" when the record was made by Record, which does not know it.
	BanNamespace string `json:"ban_namespace"`
	// Malformed, when not empty, says that the store holds a record here
	// that it cannot read, and what is wrong with it: it refuses nothing,
	// every other field but Key and Range is empty, and lifting it
	// deletes it (protect.ErrMalformed).
	Malformed string `json:"malformed"`
}

// Record converts a ban, with the time it has left at now.
func Record(b protect.Ban, now time.Time) BanRecord {
	return banRecord(&b, b.Key.String(), now, nil)
}

// banRecord is Record of b, whose key reads key, taking the record's
// Expires and SecondsLeft from ends (nil: an allocation each).
func banRecord(b *protect.Ban, key string, now time.Time, ends *endSlab) BanRecord {
	if b.Malformed != "" {
		return BanRecord{Key: key, Range: b.Range, Malformed: b.Malformed}
	}
	r := BanRecord{
		Key: key, Range: b.Range, Reason: b.Reason, Source: string(b.Source), By: b.By,
		Created: b.Created.UTC(), Permanent: b.Permanent(), Offense: b.Offense,
	}
	if !b.Permanent() {
		r.Expires, r.SecondsLeft = ends.end(b.Expires.UTC(), ceilSeconds(b.Left(now)))
	}
	return r
}

// endSlab hands out the Expires and SecondsLeft of many records from
// arrays of many, rather than two allocations a record. The zero value
// starts with small arrays; a nil one allocates each.
type endSlab struct {
	exp  []time.Time
	left []int64
}

// newEndSlab returns an endSlab with room for n records.
func newEndSlab(n int) *endSlab {
	return &endSlab{exp: make([]time.Time, 0, n), left: make([]int64, 0, n)}
}

// end returns pointers to a copy of exp and of left. A full array is
// never grown in place, for the pointers handed out point into it: the
// next ones come from a new array.
func (s *endSlab) end(exp time.Time, left int64) (*time.Time, *int64) {
	if s == nil {
		// Copies, so that only this branch allocates: returning &exp would
		// move the parameters to the heap on every call.
		e, l := exp, left
		return &e, &l
	}
	if len(s.exp) == cap(s.exp) {
		n := max(64, 2*cap(s.exp))
		s.exp, s.left = make([]time.Time, 0, n), make([]int64, 0, n)
	}
	s.exp, s.left = append(s.exp, exp), append(s.left, left)
	return &s.exp[len(s.exp)-1], &s.left[len(s.left)-1]
}

// ceilSeconds rounds d up to whole seconds, without overflowing near
// math.MaxInt64 as d + time.Second - 1 would.
func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}

// Records converts bans from a's ban list, naming it; an empty list is []
// in JSON, never null.
func (a *Admin) Records(bans []protect.Ban) []BanRecord {
	out := Records(bans, a.now())
	bns := a.p.Config().BanNamespace
	for i := range out {
		out[i].BanNamespace = bns
	}
	return out
}

// record is Record for a ban of a's ban list.
func (a *Admin) record(b protect.Ban) *BanRecord {
	r := Record(b, a.now())
	r.BanNamespace = a.p.Config().BanNamespace
	return &r
}

// Records converts bans; an empty list is [] in JSON, never null.
func Records(bans []protect.Ban, now time.Time) []BanRecord {
	out := make([]BanRecord, 0, len(bans))
	ends := newEndSlab(len(bans))
	for i := range bans {
		out = append(out, banRecord(&bans[i], bans[i].Key.String(), now, ends))
	}
	return out
}

// Filter selects bans. The zero Filter selects every ban.
type Filter struct {
	// Within keeps bans on keys and ranges inside this network.
	Within netip.Prefix
	// RangesOnly keeps range bans alone: on Redis one read of one hash,
	// never a scan of the keyspace.
	RangesOnly bool
	// Source keeps automatic or manual bans only; "" keeps both.
	Source protect.Source
	// Limit keeps the first Limit bans (soonest expiry first); 0 keeps all.
	Limit int

	// Covers keeps the bans that refuse this address: its key's, and
	// those of the ranges that hold it (an IPv6 client counted under its
	// /64 is found by its address). Service.Bans and GET /v1/bans
	// (covers) read it; Admin.Bans ignores it.
	Covers netip.Addr
	// Match keeps the bans whose key holds it, ignoring case ("" keeps
	// every one); "consumer:NAME", a consumer's key as the dashboard
	// shows it, keeps the consumers' bans whose key holds NAME. Reason
	// keeps those whose reason holds it. Service.Bans and
	// GET /v1/bans (q, reason) read them; Admin.Bans ignores them.
	Match, Reason string
	// Sort orders a listing of Service.Bans as ParseSort reads it; "" is
	// the default order (soonest expiry first). Admin.Bans ignores it.
	Sort string
	// Offset skips that many bans of the ordered listing before Limit
	// keeps its page: Service.BansPage and GET /v1/bans (offset).
	Offset int
}

// Bans lists the active bans in the protector's ban list that f
// selects, soonest expiry first and permanent bans last. An empty list
// is empty, never nil. It reads the protector's Space (store.ListBans):
// on a store outside this process each page of the listing (about a
// thousand bans on Redis) has its own StoreTimeout; ctx bounds the whole.
func (a *Admin) Bans(ctx context.Context, f Filter) ([]protect.Ban, error) {
	sp := a.p.Space()
	if _, ok := sp.(store.BanPager); !ok { // one call: one deadline
		var cancel context.CancelFunc
		ctx, cancel = a.deadline(ctx)
		defer cancel()
	}
	bans, err := store.ListBans(ctx, sp, protect.BanFilter{Within: f.Within, RangesOnly: f.RangesOnly}, a.perPage())
	if err != nil {
		return nil, fmt.Errorf("admin: list bans: %w", err)
	}
	out := bans[:0]
	for _, b := range bans {
		if f.Source == "" || b.Source == f.Source {
			out = append(out, b)
		}
	}
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// Ban adds a manual ban on each target (an address, a CIDR, or
// consumer:NAME). A target that does not parse, or a CIDR too wide for
// protect.Protector.Ban without opt.Force, or one whose ban would cover
// loopback (127.0.0.0/8, ::1; forced or not), or one an allowlist entry
// covers (store.ErrAllowed), stops it before anything is written.
func (a *Admin) Ban(ctx context.Context, targets []string, opt protect.BanOptions) ([]protect.Ban, error) {
	if err := a.checkBans(targets, opt.Force); err != nil {
		return nil, err
	}
	if err := a.checkAllowed(ctx, targets); err != nil {
		return nil, err
	}
	var out []protect.Ban
	for _, t := range targets {
		b, err := a.p.Ban(ctx, t, opt)
		if err != nil {
			return out, err
		}
		out = append(out, b)
	}
	return out, nil
}

// deadline bounds one call of the store to perPage, as the protector's
// guard bounds its own: Protector.Space is the store's space, without
// the guard.
func (a *Admin) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if d := a.perPage(); d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return ctx, func() {}
}

// perPage is the deadline of each call of the store, and of each page of
// a listing: StoreTimeout for a space outside this process, none for a
// local one, as the protector gives its own.
func (a *Admin) perPage() time.Duration {
	if l, ok := a.p.Space().(store.LocalSpace); ok && l.Local() {
		return 0
	}
	return a.p.Config().StoreTimeout
}

// InspectKey reports the state of k in the protector's namespace and ban
// list (its count, its ban, its offenses, its plan usage) without
// changing anything, within StoreTimeout on a store outside this
// process. Inspect is this for a target, as protectctl shows it.
func (a *Admin) InspectKey(ctx context.Context, k protect.Key) (protect.KeyState, error) {
	ctx, cancel := a.deadline(ctx)
	defer cancel()
	st, err := a.p.Space().Inspect(ctx, k)
	if err != nil {
		return protect.KeyState{}, fmt.Errorf("admin: inspect %s: %w", k, err)
	}
	return st, nil
}

// ErrNoTarget is returned when a lift names nothing and does not ask for
// everything.
var ErrNoTarget = errors.New("admin: no target (lifting every ban must be asked for explicitly)")

// Lift lifts the bans on each target with protect.Protector.Lift: an
// address lifts its counting key, a CIDR every ban inside it. With no
// targets it lifts nothing and returns ErrNoTarget; LiftAll lifts
// everything. A target that does not parse, or a CIDR wider than a /8 of
// IPv4 or a /16 of IPv6 (protect.ErrWideTarget: an operator's typo is
// more likely than a wish to lift a whole family), stops it before
// anything is lifted.
func (a *Admin) Lift(ctx context.Context, targets []string, by string) ([]protect.Ban, error) {
	return a.lift(ctx, targets, by, false)
}

// LiftWide is Lift that takes CIDRs of any width (0.0.0.0/0 lifts every
// ban on IPv4), as protect.Protector.Lift does.
func (a *Admin) LiftWide(ctx context.Context, targets []string, by string) ([]protect.Ban, error) {
	return a.lift(ctx, targets, by, true)
}

func (a *Admin) lift(ctx context.Context, targets []string, by string, wide bool) ([]protect.Ban, error) {
	if len(targets) == 0 {
		return nil, ErrNoTarget
	}
	if err := a.checkTargets(targets, wide); err != nil {
		return nil, err
	}
	lifted := []protect.Ban{}
	for _, t := range targets {
		bans, err := a.p.Lift(ctx, t, by)
		lifted = append(lifted, bans...)
		if err != nil {
			return lifted, err
		}
	}
	return lifted, nil
}

// LiftAll lifts every ban in the protector's ban list, through
// protect.Protector.Lift, which counts, logs and cleans up each as any
// lift: the bans on addresses and ranges as the lifts of 0.0.0.0/0 and
// ::/0 (a page at a time where the store can, one round trip per page on
// Redis), then each consumer key's ban that a listing finds, one by one.
func (a *Admin) LiftAll(ctx context.Context, by string) ([]protect.Ban, error) {
	lifted := []protect.Ban{}
	for _, family := range [...]string{"0.0.0.0/0", "::/0"} {
		bans, err := a.p.Lift(ctx, family, by)
		lifted = append(lifted, bans...)
		if err != nil {
			return lifted, err
		}
	}
	bans, err := a.Bans(ctx, Filter{})
	if err != nil {
		return lifted, err
	}
	var errs []error
	for _, b := range bans {
		if b.Key.Prefix.IsValid() {
			continue // an address or range ban written after the lifts above
		}
		target := protect.ConsumerPrefix + b.Key.Name
		if k, _, err := a.Target(target); err != nil || k != b.Key {
			errs = append(errs, fmt.Errorf("admin: lift %s: no target names this key", b.Key))
			continue
		}
		got, err := a.p.Lift(ctx, target, by)
		lifted = append(lifted, got...)
		if err != nil {
			return lifted, err
		}
	}
	return lifted, errors.Join(errs...)
}

// checkBans is checkTargets for a ban: it also refuses a target whose
// ban would cover loopback (CheckBanTarget).
func (a *Admin) checkBans(targets []string, force bool) error {
	var errs []error
	for _, t := range targets {
		if err := a.CheckBanTarget(t, force); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (a *Admin) checkTargets(targets []string, wide bool) error {
	var errs []error
	for _, t := range targets {
		if err := a.CheckTarget(t, wide); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Inspection is what protectctl inspect shows about one target.
type Inspection struct {
	Target string `json:"target"`
	Key    string `json:"key"`
	// Safe reports that the address is in SafeNetworks (never for
	// ranges and consumers).
	Safe bool `json:"safe"`
	// Count is the stream's current count; CountSecondsLeft how long until
	// it is forgotten without requests (rounded up).
	Count            int64 `json:"count"`
	CountSecondsLeft int64 `json:"count_seconds_left"`
	Limit            int64 `json:"limit"`
	BanLimit         int64 `json:"ban_limit"`
	// LimitsPublished reports that Limit and BanLimit are the numbers the
	// service publishes in its namespace; false: the protector's own
	// settings, for nothing published matches them.
	LimitsPublished bool `json:"limits_published"`
	// Ban is the ban on the key itself; null when none.
	Ban *BanRecord `json:"ban"`
	// RangeBans are the range bans covering an address target.
	RangeBans []BanRecord `json:"range_bans"`
	// Offenses counts automatic bans within the offense window.
	Offenses int `json:"offenses"`
	// Limits are the plan limits the store holds for the key (a consumer,
	// or an address under Config.Plan), sorted by name; [] when none.
	Limits []LimitRecord `json:"limits"`
	// Namespace and BanNamespace are the protector's counters and ban
	// list that the record reports.
	Namespace    string `json:"namespace"`
	BanNamespace string `json:"ban_namespace"`
	// Protectors holds, from Service.Inspect, the record of each
	// protector of the service, in order (each with Protectors []); []
	// from Admin.Inspect.
	Protectors []Inspection `json:"protectors"`
}

// Inspect reports a target's key, counter, bans, offenses and stored plan
// limits, changing nothing.
func (a *Admin) Inspect(ctx context.Context, target string) (Inspection, error) {
	return a.InspectPlans(ctx, target, nil)
}

// InspectPlans is Inspect that also says, for each stored limit, what is
// left of it under each of plans (by name) that has a limit of that name
// and kind. Given exactly one plan, it also lists that plan's limits the
// store holds nothing for: they are whole.
func (a *Admin) InspectPlans(ctx context.Context, target string, plans map[string]*protect.Plan) (Inspection, error) {
	k, _, err := a.Target(target)
	if err != nil {
		return Inspection{}, err
	}
	st, err := a.InspectKey(ctx, k)
	if err != nil {
		return Inspection{}, err
	}
	cfg := a.p.Config()
	in := Inspection{
		Target: target, Key: k.String(), Count: st.Count,
		CountSecondsLeft: ceilSeconds(st.CountTTL),
		Limit:            cfg.MaxRequests, BanLimit: cfg.BanLimit, Offenses: st.Offenses,
		RangeBans: []BanRecord{}, Limits: limitRecords(st.Usage, plans),
		LimitsPublished: a.published(ctx),
		Namespace:       cfg.Namespace, BanNamespace: cfg.BanNamespace, Protectors: []Inspection{},
	}
	if st.Ban != nil {
		in.Ban = a.record(*st.Ban)
	}
	if addr, err := netip.ParseAddr(target); err == nil {
		in.Safe = a.p.IsSafe(addr)
		ranges, err := a.Bans(ctx, Filter{RangesOnly: true})
		if err != nil {
			return Inspection{}, err
		}
		for _, b := range ranges {
			if b.Covers(k, addr.Unmap().WithZone("")) {
				in.RangeBans = append(in.RangeBans, *a.record(b))
			}
		}
	}
	return in, nil
}

// Steps of the pipeline, as Explanation.Step names them.
const (
	StepUnknown = "unknown" // the client address cannot be determined
	StepSafe    = "safe"    // in SafeNetworks
	StepBanned  = "banned"  // a ban holds it
	StepBlocked = "blocked" // on a block list (Config.BlockLists, CrowdSec)
	StepLimited = "limited" // nothing left: the next request would be limited
	StepAllowed = "allowed"
	// StepExhausted: a quota of the client's plan is used up (Config.Plan,
	// Config.ConsumerFunc).
	StepExhausted = "exhausted"
	// StepChallenged: past Config.Challenge.After, the client would be
	// asked to prove it is a browser.
	StepChallenged = "challenged"
)

var steps = map[protect.Status]string{
	protect.Unknown: StepUnknown, protect.Safe: StepSafe, protect.Banned: StepBanned,
	protect.Limited: StepLimited, protect.Allowed: StepAllowed,
	protect.Exhausted: StepExhausted, protect.Blocked: StepBlocked,
	protect.Challenged: StepChallenged,
}

// Explanation says who the client of a request is and which step of the
// pipeline decides it now, as Protector.Check does.
type Explanation struct {
	Peer   string `json:"peer"`
	Client string `json:"client"` // "" when unknown
	Reason string `json:"reason"` // why the client is unknown; "" otherwise
	Key    string `json:"key"`    // "" when unknown or safe
	Step   string `json:"step"`
	// Status is the HTTP status the request gets: 200 when it is served,
	// as every request is in a dry run.
	Status int  `json:"status"`
	DryRun bool `json:"dry_run"`
	// Count is the stream's count now, before this request.
	Count    int64 `json:"count"`
	Limit    int64 `json:"limit"`
	BanLimit int64 `json:"ban_limit"`
	// LimitsPublished is Inspection.LimitsPublished.
	LimitsPublished bool       `json:"limits_published"`
	Ban             *BanRecord `json:"ban"` // the ban that refuses it
	// Notes say what the resolution of the client did that a reader
	// might not expect: a forwarding header ignored because the peer is
	// not a trusted proxy, a request made Safe by the trusted address its
	// walk ended on. [] when none.
	Notes []string `json:"notes"`
	// Namespace and BanNamespace are those of the protector that
	// explains.
	Namespace    string `json:"namespace"`
	BanNamespace string `json:"ban_namespace"`
	// Protectors holds, from Service.Explain, each protector's
	// explanation, in order (each with Protectors []); [] from
	// Admin.Explain.
	Protectors []Explanation `json:"protectors"`
}

// Explain resolves the client of a request given by its peer address and
// header lines, and says which step decides it now. It is Protector.Check,
// formatted: it counts nothing and writes nothing.
func (a *Admin) Explain(ctx context.Context, peer string, header map[string][]string) (Explanation, error) {
	cfg := a.p.Config()
	req := newRequest(peer, header)
	d, err := a.p.Check(ctx, req)
	if err != nil {
		return Explanation{}, err
	}
	if d.Err != nil && d.Status != protect.Unknown {
		return Explanation{}, d.Err // a store error: nothing to explain
	}
	ex := Explanation{
		Peer: peer, Key: d.Key.String(), Step: steps[d.Status], Status: d.StatusCode(), DryRun: d.DryRun,
		Count: d.Count, Limit: cfg.MaxRequests, BanLimit: cfg.BanLimit,
		LimitsPublished: a.published(ctx),
		Namespace:       cfg.Namespace, BanNamespace: cfg.BanNamespace, Protectors: []Explanation{},
	}
	if d.Addr.IsValid() {
		ex.Client = d.Addr.String()
	}
	ex.Reason, ex.Notes = a.resolution(req, d)
	if d.Ban != nil {
		ex.Ban = a.record(*d.Ban)
	}
	return ex, nil
}

// resolution explains how the client of req was found, for Explain: why
// it is unknown, and notes on what a reader might not expect.
func (a *Admin) resolution(req *http.Request, d protect.Decision) (reason string, notes []string) {
	res := a.resolve(req)
	notes = []string{}
	if res.IgnoredHeader {
		notes = append(notes, fmt.Sprintf("%s ignored: the peer %s is not a trusted proxy, and a client that connects directly can write any header",
			res.Header, res.Peer))
	}
	where := "the peer"
	if len(req.Header[res.Header]) > 0 {
		where = "the leftmost entry"
	}
	if res.TrustedEnd {
		what := "the client, as nginx's realip module decides"
		if d.Status == protect.Safe {
			what += ", and in SafeNetworks: safe"
		}
		return "", append(notes, fmt.Sprintf("no untrusted entry in %s: the walk ended on %s, %s, a trusted address, which is %s", res.Header, where, res.Client, what))
	}
	if res.Err == nil {
		return "", notes
	}
	if d.Status == protect.Safe {
		return "", append(notes, fmt.Sprintf("no client in %s: the walk ended on %s, %s, a trusted address in SafeNetworks: safe", res.Header, where, res.End))
	}
	reason = res.Err.Error()
	switch {
	case res.BadEntry != "":
		reason += fmt.Sprintf(": %q", res.BadEntry)
	case errors.Is(res.Err, protect.ErrUnknownClient) && res.End.IsValid():
		reason += fmt.Sprintf(" (%s); the walk ended on %s, %s, which is not in SafeNetworks", res.Header, where, res.End)
	}
	return reason, notes
}

// ParseHeader parses "Name: value" as given to protectctl explain -H.
func ParseHeader(s string) (name, value string, err error) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			if i == 0 {
				break
			}
			return s[:i], strings.Trim(s[i+1:], " \t"), nil
		}
	}
	return "", "", fmt.Errorf("admin: header %q: want \"Name: value\"", s)
}
