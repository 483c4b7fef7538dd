package admin

import (
	"net/http"
	"net/textproto"
)

// newRequest builds the request explain asks about: a peer and header
// lines, in the order given.
func newRequest(peer string, header map[string][]string) *http.Request {
	h := make(http.Header, len(header))
	for name, lines := range header {
		k := textproto.CanonicalMIMEHeaderKey(name)
		h[k] = append(h[k], lines...)
	}
	return &http.Request{Method: "GET", RemoteAddr: peer, Header: h}
}
