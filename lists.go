package protect

import (
	"context"
	"net/http"
	"net/netip"

	"github.com/httpprotect/protect/blocklist"
	"github.com/httpprotect/protect/internal/clientaddr"
)

// blocked writes into d the refusal of a by the list entry hit, out of
// the hot path.
//
//go:noinline
func (p *Protector) blocked(d *Decision, a netip.Addr, hit *blocklist.Hit) {
	e := hit.Entry
	d.Status, d.Addr, d.Key, d.code, d.DryRun = Blocked, a, p.agg.Key(a), http.StatusForbidden, p.cfg.DryRun
	d.Ban = &Ban{Key: Key{Prefix: e.Prefix}, Range: true, Reason: e.Note, Source: SourceList, By: hit.List, Expires: e.Expires}
	d.BanExpires = e.Expires
	p.logDryRun(d)
}

// listChallenged writes into d, not yet decided, the list entry of hit,
// which is marked to challenge, as d.Ban: request then decides the
// client as any other (listedRequest).
func (p *Protector) listChallenged(d *Decision, hit *blocklist.Hit) {
	e := hit.Entry
	d.Ban = &Ban{Key: Key{Prefix: e.Prefix}, Range: true, Reason: e.Note, Source: SourceList, By: hit.List, Expires: e.Expires}
}

// listedRequest decides r, from a on a list marked to challenge by the
// entry ban, as request does, and makes an Allowed answer Challenged.
func (p *Protector) listedRequest(ctx context.Context, r *http.Request, a netip.Addr, n int64, ban *Ban) (d Decision, err error) {
	if p.cfg.ConsumerFunc != nil || p.cfg.KeyFunc != nil {
		d, err = p.consumerRequest(ctx, r, a, n)
	} else {
		err = p.decide(ctx, &d, p.agg.Key(a), a, n)
	}
	listedChallenge(&d, ban)
	return d, err
}

// listedAddr is VerifyAddr of a, on a list marked to challenge by the
// entry ban.
func (p *Protector) listedAddr(ctx context.Context, a netip.Addr, ban *Ban) (d Decision, err error) {
	defer p.decided(&d)
	err = p.decide(ctx, &d, p.agg.Key(a), a, 1)
	listedChallenge(&d, ban)
	return d, err
}

// listedChallenge makes d, decided for a client on a list marked to
// challenge by the entry ban, Challenged when it is Allowed; a refusal
// (Limited, Banned) stands, and so does an already Challenged stream.
func listedChallenge(d *Decision, ban *Ban) {
	if d.Status == Allowed {
		d.Status, d.Ban, d.Remaining = Challenged, ban, 0
	}
}

// BlockListMatches returns, for each of Config.BlockLists that holds
// addr (unmapped first), the entry that does, in Config order; nil when
// none does or addr is not valid. It reads the sets in force, as
// requests do, and says nothing of SafeNetworks, which pass an address
// before any list is asked (IsSafe tells). protectctl check and the
// admin API's check show these beside the bans.
func (p *Protector) BlockListMatches(addr netip.Addr) []ListMatch {
	a, ok := clientaddr.Normalize(addr)
	if !ok {
		return nil
	}
	return p.lists.Matches(a)
}

// BlockListEntries returns every entry of every one of Config.BlockLists
// in force, list by list in Config order; nil without lists. It copies
// the sets: a program that hands the lists on calls it (protectd's
// CrowdSec API for bouncers, with HTTP_PROTECT_LAPI_BLOCKLISTS), never a
// request.
func (p *Protector) BlockListEntries() []ListMatch { return p.lists.Entries() }

// ReloadBlockLists checks every list read from a Path or a URL now, as
// its Refresh would (blocklist.Lists.Reload tells how), and returns the
// failures joined; each failing list keeps its last good set. A program
// may call it on SIGHUP.
func (p *Protector) ReloadBlockLists(ctx context.Context) error { return p.lists.Reload(ctx) }
