package protect

import (
	"net/http"
	"net/netip"

	"github.com/httpprotect/protect/internal/clientaddr"
)

// FromTrustedProxy reports whether r's connecting peer is one whose
// headers Verify believes: a peer in TrustedProxies, a unix socket with
// TrustUnixSocket, or any peer under ProxyCount when TrustedProxies is
// empty. A program that reads other headers its proxy writes (protectd's
// X-Protect-Consumer) should believe them only when this is true, for the
// reason Verify ignores an untrusted peer's X-Forwarded-For: a client that
// connects directly can write any header.
func (p *Protector) FromTrustedProxy(r *http.Request) bool { return p.res.Trusts(r) }

type Resolution struct {
	// Peer is the connecting peer, normalised; zero for a unix socket or
	// a RemoteAddr that is not an address.
	Peer netip.Addr
	// FromTrustedProxy reports that the peer's forwarding header was
	// read (see Protector.FromTrustedProxy).
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
	// Err says why the client is unknown (it wraps ErrUnknownClient);
	// nil when Client is known.
	Err error
}

// Resolve says who the client of r is and how Verify finds it, step by
// step, changing nothing. Verify decides from the same walk.
func (p *Protector) Resolve(r *http.Request) Resolution {
	res := Resolution{Header: p.res.Header(), FromTrustedProxy: p.FromTrustedProxy(r)}
	res.Peer, _ = clientaddr.ParsePeer(r.RemoteAddr)
	res.IgnoredHeader = !res.FromTrustedProxy && len(r.Header[p.res.Header()]) > 0
	a, bad, err := p.res.Walk(r)
	switch {
	case err == nil:
		res.Client = a
		res.TrustedEnd = res.FromTrustedProxy && p.res.TrustedEnd(a)
	default:
		res.End, res.BadEntry, res.Err = a, bad, err
	}
	return res
}
