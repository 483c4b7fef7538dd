package protect

import "net/http"

// The RateLimit and RateLimit-Policy fields are lists, and several
// protectors on one request (an address gate, then a consumer plan) each
// add their own item to them rather than overwrite the others'. A line of
// the field is a protector's when its first item's key is the
// protector's name (Config.Name, or a plan's first limit): each protector
// writes its items on one line of its own.

// setField makes vals this protector's lines of field f in h: a line of
// its own (first key own) is replaced, every other line is kept, and vals
// follow them. With no other protector's line it stores vals as they are,
// shared, allocating nothing.
func setField(h http.Header, f, own string, vals []string) {
	cur := h[f]
	if len(cur) == 0 || len(cur) == 1 && ownLine(cur[0], own) {
		h[f] = vals
		return
	}
	out := make([]string, 0, len(cur)+len(vals))
	for _, l := range cur {
		if !ownLine(l, own) {
			out = append(out, l)
		}
	}
	h[f] = append(out, vals...)
}

// dropField removes this protector's lines of field f from h, keeping
// every other protector's.
func dropField(h http.Header, f, own string) {
	cur := h[f]
	n := 0
	for _, l := range cur {
		if !ownLine(l, own) {
			n++
		}
	}
	switch {
	case n == len(cur):
		return
	case n == 0:
		delete(h, f)
		return
	}
	out := make([]string, 0, n)
	for _, l := range cur {
		if !ownLine(l, own) {
			out = append(out, l)
		}
	}
	h[f] = out
}

// ownLine reports whether a field line starts with the item "<own>";.
func ownLine(l, own string) bool {
	return len(l) >= len(own)+3 && l[0] == '"' && l[1:1+len(own)] == own && l[1+len(own)] == '"' && l[2+len(own)] == ';'
}
