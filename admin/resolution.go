package admin

import (
	"net/http"
	"net/netip"

	"github.com/httpprotect/protect/internal/clientaddr"
)

// A resolution says who the client of a request is and how Verify
// finds it, step by step.
type resolution struct {
	// Peer is the connecting peer, normalised; zero for a unix socket or
	// a RemoteAddr that is not an address.
	Peer netip.Addr
	// FromTrustedProxy reports that the peer's forwarding header was
	// read (see protect.Protector.FromTrustedProxy).
	FromTrustedProxy bool
	// Header is the forwarding header Verify reads, canonical.
	Header string
	// IgnoredHeader reports that the request carries Header from a peer
	// that is not a trusted proxy, so it was not read: a client that
	// connects directly can write any header.
	IgnoredHeader bool
	// Client is the client address; zero when unknown.
	Client netip.Addr
	// TrustedEnd reports that Client is itself a trusted address, where
	// the walk ended: the peer when it sent no header, the leftmost entry
	// when every entry is a trusted hop.
	TrustedEnd bool
	// End is the trusted address a walk that found no client ended on:
	// under ProxyCount, the leftmost entry of a header with fewer entries
	// than proxies. The request is Safe when SafeNetworks holds it, and
	// Unknown otherwise.
	End netip.Addr
	// BadEntry is the entry of Header that is not an address, when that
	// is why the client is unknown.
	BadEntry string
	// Err says why the client is unknown (it wraps protect.ErrUnknownClient);
	// nil when Client is known.
	Err error
}

// resolve says who the client of r is and how Verify finds it, step by
// step, changing nothing: the walk Verify makes, by a resolver made from
// the protector's Config.
func (a *Admin) resolve(r *http.Request) resolution {
	res := resolution{Header: a.res.Header(), FromTrustedProxy: a.res.Trusts(r)}
	res.Peer, _ = clientaddr.ParsePeer(r.RemoteAddr)
	res.IgnoredHeader = !res.FromTrustedProxy && len(r.Header[a.res.Header()]) > 0
	addr, bad, err := a.res.Walk(r)
	switch {
	case err == nil:
		res.Client = addr
		res.TrustedEnd = res.FromTrustedProxy && a.res.TrustedEnd(addr)
	default:
		res.End, res.BadEntry, res.Err = addr, bad, err
	}
	return res
}
