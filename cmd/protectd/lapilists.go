package main

import (
	"context"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
)

// withBlockLists lists a protector's bans and, after them, every entry
// of its block lists as a ban of source "list" (HTTP_PROTECT_LAPI_BLOCKLISTS):
// so that a site's CrowdSec bouncers refuse what protect's lists refuse.
// An entry's scenario is its note (an SBL reference, a CrowdSec
// scenario), or the list's name when the list says nothing; an entry
// with no end in the list is permanent. Entries of the list named
// "crowdsec" are handed on too: a bouncer of this LAPI may not reach
// CrowdSec's own.
type withBlockLists struct{ a *admin.Admin }

func (w withBlockLists) Bans(ctx context.Context, f admin.Filter) ([]protect.Ban, error) {
	bans, err := w.a.Bans(ctx, f)
	if err != nil {
		return nil, err
	}
	for _, m := range w.a.Protector().BlockListEntries() {
		reason := m.Note
		if reason == "" {
			reason = "blocklist:" + m.List
		}
		bans = append(bans, protect.Ban{Key: protect.Key{Prefix: m.Entry}, Range: !m.Entry.IsSingleIP(),
			Reason: reason, Source: protect.SourceList, By: m.List, Expires: m.Expires})
	}
	return bans, nil
}
