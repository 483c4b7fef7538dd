package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
)

// A Key names what one stream counter counts: an address prefix (a client's
// aggregated address, or a range an operator banned) or a consumer name.
// The zero Key names nothing.
type Key struct {
	// Prefix is the counted network: 203.0.113.7/32, 2001:db8:1:2::/64,
	// or an operator's range such as 198.51.100.0/24. Always masked and
	// unmapped. Invalid when Name is set.
	Prefix netip.Prefix
	// Name is a consumer key, as ConsumerKey returns it.
	Name string
}

// IsZero reports whether k names nothing.
func (k Key) IsZero() bool { return k.Name == "" && !k.Prefix.IsValid() }

// String returns the key as protect prints and stores it: a bare address
// for a single host ("203.0.113.7"), CIDR notation for a wider prefix
// ("2001:db8:1:2::/64"), or the consumer name.
func (k Key) String() string {
	if k.Name != "" {
		return k.Name
	}
	var b [48]byte
	return string(k.appendTo(b[:0]))
}

// AppendText implements encoding.TextAppender: it appends what String
// returns.
func (k Key) AppendText(b []byte) ([]byte, error) { return k.appendTo(b), nil }

// MarshalText implements encoding.TextMarshaler, so that a Key logs and
// encodes as its text.
func (k Key) MarshalText() ([]byte, error) { return k.appendTo(nil), nil }

func (k Key) appendTo(b []byte) []byte {
	switch {
	case k.Name != "":
		return append(b, k.Name...)
	case !k.Prefix.IsValid():
		return b
	case k.Prefix.IsSingleIP():
		return k.Prefix.Addr().AppendTo(b)
	}
	return k.Prefix.AppendTo(b)
}

// ParseKey parses a key as Key.String writes it: an address, a CIDR, or a
// consumer name (anything else ConsumerKey would keep or produce). An
// address is not aggregated here, as a ban target is (admin.Admin.Target).
func ParseKey(s string) (Key, error) {
	if looksLikeAddr(s) {
		p, err := ParsePrefix(s)
		if err != nil {
			return Key{}, fmt.Errorf("protect: key %w", err)
		}
		return Key{Prefix: p}, nil
	}
	if k, ok := keptKey(s); ok {
		return Key{Name: k}, nil
	}
	k := ConsumerKey(s)
	if k.Name != s {
		return Key{}, fmt.Errorf("protect: key %q: not an address, CIDR or consumer key", s)
	}
	return k, nil
}

// looksLikeAddr reports whether s is meant as an address or CIDR: only hex
// digits, dots, colons, a slash and a zone can make one up, and it must
// contain a dot or a colon.
func looksLikeAddr(s string) bool {
	if !strings.ContainsAny(s, ".:") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '.' || c == ':' || c == '/' || c == '%') {
			return false
		}
	}
	return true
}

// keptKey reports whether s has one of the forms ConsumerKey gives an id
// it does not keep verbatim, "~" and a hash or "~" and an address or
// CIDR, and returns it as ConsumerKey writes it.
func keptKey(s string) (string, bool) {
	if h, ok := hashedKey(s); ok {
		return h, true
	}
	if len(s) > 1 && s[0] == '~' && keyFormOf(s[1:]) == formAddr {
		return s, true
	}
	return "", false
}

// hashedKey reports whether s has the form ConsumerKey gives a hashed key,
// "~" and 32 hex digits, and returns it as ConsumerKey writes it: in
// lowercase. Hex typed in capitals would otherwise name a key that nothing
// counts, and a ban on it would hold nobody.
func hashedKey(s string) (string, bool) {
	if len(s) != 33 || s[0] != '~' {
		return "", false
	}
	if _, err := hex.DecodeString(s[1:]); err != nil {
		return "", false
	}
	return strings.ToLower(s), true
}

// maxVerbatimKey is the longest consumer key stored as it is.
const maxVerbatimKey = 32

// ConsumerKey returns the Key under which a consumer identifier is counted.
//
// Consumer keys are meant to be identifiers ("cus_alpha"), not secrets. But
// whatever a key function returns ends up in Redis key names, where MONITOR,
// SCAN, the slow log and every snapshot can read it, so anything that is not
// clearly an identifier is hashed: a key is kept verbatim only when it is at
// most 32 bytes of [A-Za-z0-9._:@/-], has no run of 20 or more letters and
// digits (the shape of a random token), and does not start like a
// well-known secret ("sk_", "ghp_", …). Such a key made of hex digits,
// dots, colons and slashes is kept verbatim only when it is an address or
// CIDR ("203.0.113.7", "10.0.0.0/8"), and then as "~" and itself, as a
// consumer named 203.0.113.7 must not share Redis keys with that address;
// any other ("3f9c2e1a:7b4d8e0f") is hashed, as a token may look so.
// Everything else becomes "~" + 32 hex digits of its SHA-256. No two of
// the three forms can be equal: a verbatim key has no "~", and an
// address has a dot or a colon, which hex digits do not.
func ConsumerKey(id string) Key {
	switch keyFormOf(id) {
	case formVerbatim:
		return Key{Name: id}
	case formAddr:
		return Key{Name: "~" + id}
	}
	return hashKey(id)
}

// hashKey is ConsumerKey's key for an id it hashes.
func hashKey(id string) Key {
	sum := sha256.Sum256([]byte(id))
	return Key{Name: "~" + hex.EncodeToString(sum[:16])}
}

// secretPrefixes are the starts of widely used secret formats.
var secretPrefixes = [...]string{"sk_", "sk-", "rk_", "pk_", "ghp_", "gho_", "ghs_", "github_pat_", "xox", "AKIA", "ASIA", "glpat-", "eyJ"}

// keyChars classifies the bytes of a verbatim consumer key: what may
// appear in one, and what may appear in an address or CIDR (see
// looksLikeAddr). One table lookup per byte, and flags gathered with AND
// and OR rather than branches: ConsumerKey runs on every consumer request.
var keyChars = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		switch {
		case b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9':
			t[c] = charOK | charAlnum
		case strings.IndexByte("._:@/-", b) >= 0:
			t[c] = charOK
		}
		if b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F' || strings.IndexByte(".:/%", b) >= 0 {
			t[c] |= charAddr
		}
		if b == '.' || b == ':' {
			t[c] |= charSep
		}
	}
	return t
}()

const (
	charOK    = 1 << iota // allowed in a verbatim key
	charAlnum             // a letter or a digit
	charAddr              // allowed in an address or CIDR
	charSep               // '.' or ':', which an address must hold
)

// tokenRun is how many letters and digits in a row make an identifier
// the shape of a random token, which ConsumerKey hashes.
const tokenRun = 20

// A keyForm is how ConsumerKey keeps an identifier.
type keyForm uint8

const (
	formVerbatim keyForm = iota // as it is
	formAddr                    // "~" and itself: it is an address or CIDR
	formHashed                  // "~" and 32 hex digits of its SHA-256
)

// keyFormOf returns the form ConsumerKey keeps id in.
func keyFormOf(id string) keyForm {
	f := keyShapeOf(id)
	if f == formAddr && !isAddrOrCIDR(id) {
		// Hex digits with a dot or a colon are as often a token
		// ("3f9c2e1a:7b4d8e0f…"), which must not reach a Redis key name.
		return formHashed
	}
	return f
}

// keyShapeOf is keyFormOf but for its last step: formAddr means that id
// is shaped like an address (see looksLikeAddr), not that it is one.
// consumerKeys.key looks such an id up before it pays for the parse.
func keyShapeOf(id string) keyForm {
	if id == "" || len(id) > maxVerbatimKey {
		return formHashed
	}
	all, some := uint8(0xff), uint8(0)
	for i := 0; i < len(id); i++ {
		c := keyChars[id[i]]
		all &= c
		some |= c
	}
	// Only an id as long as a run can hold one; most ids are shorter,
	// and tracking the run costs more than the classes above.
	if len(id) >= tokenRun && hasTokenRun(id) {
		return formHashed
	}
	if all&charOK == 0 {
		return formHashed // a byte not allowed
	}
	switch id[0] { // the first letters of secretPrefixes
	case 's', 'r', 'p', 'g', 'x', 'A', 'e':
		for i := range secretPrefixes { // by index: ranging over the array would copy it
			if strings.HasPrefix(id, secretPrefixes[i]) {
				return formHashed
			}
		}
	}
	if all&charAddr != 0 && some&charSep != 0 {
		return formAddr // shaped like one; see keyFormOf
	}
	return formVerbatim
}

// hasTokenRun reports whether id holds tokenRun letters and digits in a
// row.
func hasTokenRun(id string) bool {
	run := 0
	for i := 0; i < len(id); i++ {
		run = (run + 1) & -int(keyChars[id[i]]>>1&1) // charAlnum is 1<<1: reset on anything else
		if run >= tokenRun {
			return true
		}
	}
	return false
}

// isAddrOrCIDR reports whether s parses as an IP address or a CIDR (host
// bits may be set): the address-shaped ids ConsumerKey keeps as "~" and
// themselves.
func isAddrOrCIDR(s string) bool {
	if strings.IndexByte(s, '/') >= 0 {
		_, err := netip.ParsePrefix(s)
		return err == nil
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}
