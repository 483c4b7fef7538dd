package clientaddr

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"

	"github.com/httpprotect/protect/store"
)

// ErrUnknownClient is wrapped by every error that explains why a request's
// client address could not be determined. Such a request is refused with
// status Unknown: any input a client can craft to make resolution fail would
// otherwise let it escape the limiter.
var ErrUnknownClient = errors.New("client address unknown")

var (
	errBadPeer     = fmt.Errorf("%w: the peer address is not a usable IP address", ErrUnknownClient)
	errNoHeader    = fmt.Errorf("%w: a unix socket peer sent no forwarding header", ErrUnknownClient)
	ErrBadEntry    = fmt.Errorf("%w: the forwarding header holds an entry that is not an address", ErrUnknownClient)
	errTooFewHops  = fmt.Errorf("%w: the forwarding header has fewer entries than ProxyCount", ErrUnknownClient)
	ErrUnspecified = fmt.Errorf("%w: the address is invalid or unspecified", ErrUnknownClient)
)

// headerKind is how a forwarding header is read.
type headerKind uint8

const (
	listHeader      headerKind = iota // X-Forwarded-For: a, b, c
	forwardedHeader                   // RFC 7239 Forwarded: for=a, for=b
	singleHeader                      // X-Real-IP, CF-Connecting-IP: one address
)

// kindOf decides how a header is read from its name: "Forwarded" is
// RFC 7239, any name ending in "Forwarded-For" is a comma-separated list,
// and anything else holds one address written by the proxy.
func kindOf(canonical string) headerKind {
	switch {
	case canonical == "Forwarded":
		return forwardedHeader
	case strings.HasSuffix(canonical, "Forwarded-For"):
		return listHeader
	default:
		return singleHeader
	}
}

// A Resolver finds the client behind a request.
//
// Security model: a client that connects to us directly can put anything in
// any header, so headers are read only when the connecting peer is one of our
// own proxies (TrustedProxies, or a unix socket when TrustUnixSocket is set).
// Our proxies append the address they saw to the right of a list, so the
// list is read right to left: trusted hops are skipped and the first
// untrusted entry is the client. Everything to its left was written by the
// client or by proxies we do not know, and is never believed. If the walk
// meets an entry that is not an address, it stops with an error rather than
// skip left past it: skipping would hand the choice of address to whoever
// wrote the garbage.
//
// A walk that ends on a trusted address has found the client too, as
// nginx's realip module (real_ip_recursive on) decides: a trusted peer
// that sent no header is the client itself, and a chain of trusted hops
// only is its leftmost entry. That is an internal caller, or a curl on
// the proxy's own host. A client cannot reach this case with a forged
// header: the proxy appends the address it saw, which is untrusted for
// every outside client, so only our own network can write an all-trusted
// chain.
type Resolver struct {
	trusted   NetList
	header    string // canonical MIME header key
	kind      headerKind
	count     int // ProxyCount: the client is the count-th entry from the right
	trustUnix bool
}

// NewResolver returns the resolver of a protector: trusted are its
// proxies, header the forwarding header they write (any case), count its
// ProxyCount (0: walk the trusted hops), trustUnix whether a unix socket
// peer is one of them.
func NewResolver(trusted NetList, header string, count int, trustUnix bool) Resolver {
	h := CanonicalHeader(header)
	return Resolver{trusted: trusted, header: h, kind: kindOf(h), count: count, trustUnix: trustUnix}
}

// Header returns the forwarding header the resolver reads, canonical.
func (rv *Resolver) Header() string { return rv.header }

// TrustedEnd reports whether the resolver walks trusted hops (no ProxyCount)
// and a trusts: then a client found at a is itself a trusted address.
func (rv *Resolver) TrustedEnd(a netip.Addr) bool { return rv.count == 0 && rv.trusted.Contains(a) }

// Resolve returns the normalised (unmapped, zone-free) client address of
// r. When there is none, err says why, and a is the trusted address the
// walk ended on, if any: under ProxyCount, the leftmost entry of a header
// with fewer entries than proxies. That address was written by one of our
// proxies, never by the client, so it may be believed for one question:
// whether it is in SafeNetworks (health checks from the load balancer's
// subnet).
func (rv *Resolver) Resolve(r *http.Request) (a netip.Addr, err error) {
	a, _, err = rv.Walk(r)
	return a, err
}

// Walk is Resolve, also returning the entry that is not an address when
// that is why the walk stopped.
func (rv *Resolver) Walk(r *http.Request) (a netip.Addr, bad string, err error) {
	peer, ok := ParsePeer(r.RemoteAddr)
	if !ok {
		if !rv.trustUnix || !isUnixPeer(r) {
			return netip.Addr{}, "", errBadPeer
		}
	} else if !rv.peerTrusted(peer) {
		return peer, "", nil
	}
	lines := r.Header[rv.header]
	if len(lines) == 0 {
		if !peer.IsValid() { // a unix socket: no address to count
			return peer, "", errNoHeader
		}
		return peer, "", nil
	}
	switch rv.kind {
	case forwardedHeader:
		return rv.walkForwarded(lines)
	case singleHeader:
		last := trimOWS(lines[len(lines)-1])
		a, ok := parseNode(last)
		if !ok {
			return netip.Addr{}, last, ErrBadEntry
		}
		return a, "", nil
	default:
		return rv.walkList(lines)
	}
}

// Trusts reports whether r's peer is a trusted proxy (or a unix socket
// peer, when the resolver trusts those): whether its forwarding header is
// read.
func (rv *Resolver) Trusts(r *http.Request) bool {
	if peer, ok := ParsePeer(r.RemoteAddr); ok {
		return rv.peerTrusted(peer)
	}
	return rv.trustUnix && isUnixPeer(r)
}

// peerTrusted reports whether headers from this peer are believed. In
// proxy-count mode with no TrustedProxies, every peer is taken to be the
// last of the counted proxies: only safe when the service cannot be reached
// except through them.
func (rv *Resolver) peerTrusted(peer netip.Addr) bool {
	if rv.count > 0 && rv.trusted.Empty() {
		return true
	}
	return rv.trusted.Contains(peer)
}

// hop decides one entry of a walk: done reports that a is the client.
func (rv *Resolver) hop(a netip.Addr, n int) (done bool) {
	if rv.count > 0 {
		return n == rv.count
	}
	return !rv.trusted.Contains(a)
}

// walkEnd is the error for a walk that ran out of entries: none when
// every entry was a trusted hop (the leftmost is the client), too few
// under ProxyCount, where a short header means the request skipped one
// of the proxies counted on.
func (rv *Resolver) walkEnd() error {
	if rv.count > 0 {
		return errTooFewHops
	}
	return nil
}

// walkList walks a comma-separated list over all header lines, last line
// first, each line right to left. A walk that runs out of entries returns
// the last (leftmost) one, with walkEnd's error. It does not allocate.
func (rv *Resolver) walkList(lines []string) (a netip.Addr, bad string, err error) {
	n := 0
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		end := len(line)
		for {
			start := strings.LastIndexByte(line[:end], ',') + 1
			entry := trimOWS(line[start:end])
			var ok bool
			if a, ok = parseNode(entry); !ok {
				return netip.Addr{}, entry, ErrBadEntry
			}
			n++
			if rv.hop(a, n) {
				return a, "", nil
			}
			if start == 0 {
				break
			}
			end = start - 1
		}
	}
	return a, "", rv.walkEnd()
}

// walkForwarded walks RFC 7239 elements over all lines, right to left, as
// walkList does.
func (rv *Resolver) walkForwarded(lines []string) (a netip.Addr, bad string, err error) {
	var buf [8]string
	n := 0
	for i := len(lines) - 1; i >= 0; i-- {
		fors, ok := parseForwarded(lines[i], buf[:0])
		if !ok {
			return netip.Addr{}, lines[i], ErrBadEntry
		}
		for j := len(fors) - 1; j >= 0; j-- {
			if a, ok = parseForwardedNode(fors[j]); !ok {
				return netip.Addr{}, fors[j], ErrBadEntry
			}
			n++
			if rv.hop(a, n) {
				return a, "", nil
			}
		}
	}
	return a, "", rv.walkEnd()
}

// ParsePeer parses http.Request.RemoteAddr ("1.2.3.4:5", "[::1]:5", or a
// bare address as some test harnesses write it) and normalises it.
func ParsePeer(remote string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return Normalize(ap.Addr())
	}
	if a, err := netip.ParseAddr(remote); err == nil {
		return Normalize(a)
	}
	return netip.Addr{}, false
}

// isUnixPeer reports whether r arrived over a unix socket.
func isUnixPeer(r *http.Request) bool {
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		return la.Network() == "unix"
	}
	return r.RemoteAddr == "" || r.RemoteAddr == "@" || strings.HasPrefix(r.RemoteAddr, "/")
}

// Normalize is the one place an address becomes comparable: IPv4-mapped
// IPv6 becomes IPv4 and zones go. A mapped address left as it is would
// miss every IPv4 entry of every list (netip.Prefix.Contains does not match
// ::ffff:1.2.3.4 against 1.2.3.0/24) and get a counter of its own. IPv6
// addresses that embed an IPv4 host (6to4, NAT64, Teredo) become that
// host. Unspecified addresses are never a client.
func Normalize(a netip.Addr) (netip.Addr, bool) {
	if a.Is4() { // already normal: the common case
		return a, !a.IsUnspecified()
	}
	a = a.Unmap().WithZone("")
	if !a.IsValid() || a.IsUnspecified() {
		return netip.Addr{}, false
	}
	if a.Is6() {
		a = embeddedIPv4(a) // 6to4, NAT64, Teredo: the IPv4 host (tunnel.go)
	}
	return a, true
}

// parseNode parses one entry of a forwarding list: "1.2.3.4",
// "1.2.3.4:80", "[2001:db8::1]:443", "[2001:db8::1]", "2001:db8::1",
// "::ffff:1.2.3.4", "fe80::1%eth0". An unbracketed IPv6 address is never
// split into address and port: "2001:db8::1:80" is the address it reads as.
func parseNode(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(s[1:end])
		if err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !validPort(rest[1:])) {
			return netip.Addr{}, false
		}
		return Normalize(a)
	}
	host := s
	if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		// Exactly one colon: IPv4 with a port.
		if !validPort(s[i+1:]) {
			return netip.Addr{}, false
		}
		host = s[:i]
		if a, err := netip.ParseAddr(host); err != nil || !a.Is4() {
			return netip.Addr{}, false
		}
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return Normalize(a)
}

// validPort reports whether s is a decimal port, 0–65535.
func validPort(s string) bool {
	if len(s) == 0 || len(s) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}

// trimOWS trims HTTP optional white space (space and tab).
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// parseForwarded parses one line of an RFC 7239 Forwarded header and
// appends the value of each element's "for" parameter to fors, in order.
// It is strict where leniency would let a client smuggle an address: a
// parameter given twice in one element, an element without "for", an empty
// element, a value that is neither a token nor a complete quoted string are
// all errors. A comma or semicolon inside quotes is part of the value.
// White space around separators is allowed, as proxies write it.
func parseForwarded(line string, fors []string) ([]string, bool) {
	i := 0
	for {
		var forVal string
		var seen uint8 // bit set of for, by, host, proto
		hasFor := false
		for {
			i = skipOWS(line, i)
			start := i
			for i < len(line) && isTchar(line[i]) {
				i++
			}
			name := line[start:i]
			if name == "" || i >= len(line) || line[i] != '=' {
				return fors, false
			}
			i++
			val, next, ok := forwardedValue(line, i)
			if !ok {
				return fors, false
			}
			i = next
			var bit uint8
			switch {
			case strings.EqualFold(name, "for"):
				bit = 1
				forVal, hasFor = val, true
			case strings.EqualFold(name, "by"):
				bit = 2
			case strings.EqualFold(name, "host"):
				bit = 4
			case strings.EqualFold(name, "proto"):
				bit = 8
			}
			if bit != 0 {
				if seen&bit != 0 {
					return fors, false
				}
				seen |= bit
			}
			i = skipOWS(line, i)
			if i < len(line) && line[i] == ';' {
				i++
				continue
			}
			break
		}
		if !hasFor {
			return fors, false
		}
		fors = append(fors, forVal)
		if i >= len(line) {
			return fors, true
		}
		if line[i] != ',' {
			return fors, false
		}
		i++
	}
}

// forwardedValue reads a token or a quoted string starting at line[i] and
// returns the value (unescaped) and the index after it.
func forwardedValue(line string, i int) (string, int, bool) {
	if i < len(line) && line[i] == '"' {
		i++
		start := i
		escaped := false
		for i < len(line) {
			switch c := line[i]; {
			case c == '\\':
				if i+1 >= len(line) {
					return "", i, false
				}
				escaped = true
				i += 2
			case c == '"':
				v := line[start:i]
				if escaped {
					v = unescapeQuoted(v)
				}
				return v, i + 1, true
			case c < 0x20 && c != '\t' || c == 0x7f:
				return "", i, false
			default:
				i++
			}
		}
		return "", i, false // unterminated
	}
	start := i
	for i < len(line) && isTchar(line[i]) {
		i++
	}
	if i == start {
		return "", i, false
	}
	return line[start:i], i, true
}

// unescapeQuoted removes quoted-pair backslashes.
func unescapeQuoted(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseForwardedNode parses an RFC 7239 node: IPv4 or bracketed IPv6 with
// an optional port (numeric or obfuscated). "unknown" and obfuscated
// identifiers ("_hidden") are valid syntax but name no address, so they
// are not a client. An unbracketed IPv6 address is invalid here: the RFC
// requires brackets.
func parseForwardedNode(s string) (netip.Addr, bool) {
	if s == "" || s[0] == '_' || strings.EqualFold(s, "unknown") {
		return netip.Addr{}, false
	}
	host, port := s, ""
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		host, port = s[1:end], s[end+1:]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
	} else if i := strings.IndexByte(s, ':'); i >= 0 {
		host, port = s[:i], s[i:]
	}
	if port != "" {
		if port[0] != ':' || !(validPort(port[1:]) || isObfuscated(port[1:])) {
			return netip.Addr{}, false
		}
	}
	a, err := netip.ParseAddr(host)
	if err != nil || (s[0] != '[' && !a.Is4()) {
		return netip.Addr{}, false
	}
	return Normalize(a)
}

// isObfuscated reports whether s is an RFC 7239 obfuscated identifier.
func isObfuscated(s string) bool {
	if len(s) < 2 || s[0] != '_' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func skipOWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// isTchar reports whether c is an RFC 9110 token character.
func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// CanonicalHeader returns the canonical form of a header name.
func CanonicalHeader(name string) string {
	return textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name))
}

// ValidHeaderName reports whether s is a header field name: one or more
// tchars (RFC 9110).
func ValidHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return s != ""
}

// An Aggregator maps a client address to the key it is counted under.
//
// One host with an IPv6 /64 can rotate through 2^64 addresses, so IPv6
// clients are counted per /64 by default; IPv4 clients per address.
type Aggregator struct {
	V4Bits, V6Bits int
}

// Key returns the counting key of a normalised address.
func (ag Aggregator) Key(a netip.Addr) store.Key {
	bits := ag.V6Bits
	if a.Is4() {
		bits = ag.V4Bits
	}
	if bits == a.BitLen() {
		return store.Key{Prefix: netip.PrefixFrom(a, bits)} // nothing to mask
	}
	p, _ := a.Prefix(bits) // bits was checked by New
	return store.Key{Prefix: p}
}
