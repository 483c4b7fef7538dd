package main

import (
	"github.com/httpprotect/protect"
)

// blockListBans returns the entries of p's block lists as bans of source
// "list" (HTTP_PROTECT_LAPI_BLOCKLISTS), for the Local API to hand on
// beside the bans: so that a site's CrowdSec bouncers refuse what
// protect's lists refuse. An entry's scenario is its note (an SBL
// reference, a CrowdSec scenario), or the list's name when the list says
// nothing; an entry with no end in the list is permanent. Entries of the
// list named "crowdsec" are handed on too: a bouncer of this LAPI may not
// reach CrowdSec's own. Entries of lists marked to challenge are not:
// a bouncer would ban what protect only challenges.
func blockListBans(p *protect.Protector) func() []protect.Ban {
	return func() []protect.Ban {
		var bans []protect.Ban
		for _, m := range p.BlockListEntries() {
			if m.Challenge { // a list's challenge is not a ban for other bouncers
				continue
			}
			reason := m.Note
			if reason == "" {
				reason = "blocklist:" + m.List
			}
			bans = append(bans, protect.Ban{Key: protect.Key{Prefix: m.Entry}, Range: !m.Entry.IsSingleIP(),
				Reason: reason, Source: protect.SourceList, By: m.List, Expires: m.Expires})
		}
		return bans
	}
}
