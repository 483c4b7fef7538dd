package admin

import (
	"cmp"
	"context"
	"net/netip"
	"slices"
	"strings"

	"github.com/httpprotect/protect"
)

// sortKeys are the orders ParseSort takes.
func sortKeys() []string { return []string{"expires", "key", "created", "offense", "reason"} }

// ParseSort checks an order of Filter.Sort and GET /v1/bans (sort): ""
// or one of expires (the default: soonest first, permanent bans after
// every ban that ends), key (addresses as addresses, then consumers),
// created, offense and reason; a "-" in front reverses it.
func ParseSort(s string) (string, error) {
	if s == "" || slices.Contains(sortKeys(), strings.TrimPrefix(s, "-")) {
		return s, nil
	}
	return "", badf("sort %q: want one of %s, - in front for the reverse", s, strings.Join(sortKeys(), ", "))
}

// BansPage lists the bans f selects in every ban list of the service, as
// Bans, and returns the page of them that f.Offset and f.Limit cut, with
// the number of bans f selects before the cut: a page of the listing
// travels, never the whole of it. The store is read whole for each page
// (a listing is sorted by what only the bans say); on Redis a page at a
// time, each page under StoreTimeout.
func (s *Service) BansPage(ctx context.Context, f Filter) ([]BanRecord, int, error) {
	sortBy, err := ParseSort(f.Sort)
	if err != nil {
		return nil, 0, err
	}
	if f.Offset < 0 || f.Limit < 0 {
		return nil, 0, badf("offset %d, limit %d: want numbers of at least 0", f.Offset, f.Limit)
	}
	match, reason := strings.ToLower(f.Match), strings.ToLower(f.Reason)
	// "consumer:NAME" is a consumer's key as the dashboard and protectctl
	// show it: the consumers' keys that hold NAME.
	match, consumers := strings.CutPrefix(match, "consumer:")
	every := match == "" && reason == "" && !consumers && !f.Covers.IsValid()
	out := []BanRecord{}
	ends := &endSlab{}
	for _, a := range s.lists() {
		bans, err := a.Bans(ctx, Filter{Within: f.Within, Source: f.Source})
		if err != nil {
			return nil, 0, err
		}
		if every { // each ban is a record: room for them at once
			out = slices.Grow(out, len(bans))
			ends = newEndSlab(len(bans))
		}
		now, bns := a.now(), a.p.Config().BanNamespace
		for i := range bans {
			b := &bans[i]
			key := b.Key.String()
			r := b.Reason
			if b.Malformed != "" {
				r = "" // a damaged record says no reason
			}
			if !contains(key, match) || !contains(r, reason) || !covers(b.Key, f.Covers) || consumers && b.Key.Prefix.IsValid() {
				continue
			}
			rec := banRecord(b, key, now, ends)
			rec.BanNamespace = bns
			out = append(out, rec)
		}
	}
	sortRecords(out)
	switch by, desc := strings.CutPrefix(sortBy, "-"); {
	case by == "" || by == "expires":
		if desc {
			slices.Reverse(out)
		}
	default:
		slices.SortStableFunc(out, func(a, b BanRecord) int {
			if desc {
				return compareBy(by, b, a)
			}
			return compareBy(by, a, b)
		})
	}
	total := len(out)
	out = out[min(f.Offset, total):]
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, total, nil
}

// covers reports whether a ban on k refuses addr; every ban does when
// addr is the zero Addr.
func covers(k protect.Key, addr netip.Addr) bool {
	return !addr.IsValid() || k.Prefix.IsValid() && k.Prefix.Contains(addr.Unmap())
}

// contains reports whether s holds lower, which is in lower case; ""
// is in every s.
func contains(s, lower string) bool {
	return lower == "" || strings.Contains(strings.ToLower(s), lower)
}

// compareBy compares two records by one of sortKeys other than expires;
// records that compare equal keep the default order (the sort is
// stable).
func compareBy(key string, a, b BanRecord) int {
	switch key {
	case "key":
		return compareKeys(a.Key, b.Key)
	case "created":
		return a.Created.Compare(b.Created)
	case "offense":
		return cmp.Compare(a.Offense, b.Offense)
	case "reason":
		return strings.Compare(a.Reason, b.Reason)
	}
	return 0 // ParseSort lets no other through
}

// compareKeys orders keys as an operator reads them: addresses and
// ranges by address (10.0.0.9 before 10.0.0.10), IPv4 before IPv6, a
// range after its first address; then consumers, by name.
func compareKeys(a, b string) int {
	pa, aok := keyPrefix(a)
	pb, bok := keyPrefix(b)
	switch {
	case aok && bok:
		if c := pa.Addr().Compare(pb.Addr()); c != 0 {
			return c
		}
		return cmp.Compare(pa.Bits(), pb.Bits())
	case aok:
		return -1
	case bok:
		return 1
	}
	return strings.Compare(a, b)
}

// keyPrefix reads a key as an address or a range. It tries only the
// parse the key's form calls for, since a failed parse allocates its
// error, and a sort by key reads each key many times.
func keyPrefix(k string) (netip.Prefix, bool) {
	if strings.IndexByte(k, '/') >= 0 {
		p, err := netip.ParsePrefix(k)
		return p, err == nil
	}
	if k == "" || strings.IndexByte(k, ':') < 0 && (k[0] < '0' || k[0] > '9') {
		return netip.Prefix{}, false // a consumer's name
	}
	if a, err := netip.ParseAddr(k); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}
