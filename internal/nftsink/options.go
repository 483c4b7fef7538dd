package nftsink

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Options name the sets a Sink keeps and how it reaches them. The zero
// value keeps sets ban4 and ban6 of table inet protect in this process's
// network namespace, by the wall clock.
type Options struct {
	// Family is the table's family: inet (the default), ip, ip6,
	// bridge or netdev.
	Family string
	// Table is the table's name ["protect"].
	Table string
	// Set4 and Set6 name the sets of IPv4 and IPv6 bans ["ban4", "ban6"];
	// "-" keeps no set for that family, and its bans are left out.
	Set4, Set6 string
	// NetNS is a file descriptor of the network namespace whose ruleset
	// the sink changes; 0 is this process's own. The caller keeps it open
	// for as long as the Sink lives.
	NetNS int
	// Create makes the table and the sets when they are missing. Without
	// it a missing table or set is an error that names it: the sink never
	// creates what the operator's ruleset is meant to hold, which a
	// reload of that ruleset would then remove.
	Create bool
	// Clock tells the time that bans' expiries are measured against
	// [time.Now]. Bans expire by their store's clock (Redis's, for the
	// Redis store): a skew between the two shifts every timeout by as
	// much.
	Clock func() time.Time
}

// Defaults of Options.
const (
	DefaultFamily = "inet"
	DefaultTable  = "protect"
	DefaultSet4   = "ban4"
	DefaultSet6   = "ban6"
	// NoSet, as a set's name, keeps no set for that family.
	NoSet = "-"
)

func (o Options) withDefaults() Options {
	if o.Family == "" {
		o.Family = DefaultFamily
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if o.Set4 == "" {
		o.Set4 = DefaultSet4
	}
	if o.Set6 == "" {
		o.Set6 = DefaultSet6
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// ErrSpec is wrapped by the errors of ParseSpec.
var ErrSpec = errors.New("nftsink: bad set specification")

// ParseSpec reads the sets to keep as protectd's HTTP_PROTECT_NFT names
// them: "FAMILY TABLE SET4 SET6" ("inet protect ban4 ban6"; "-" for a
// family without a set), or a boolean: true for the defaults, false for
// none (ok false). Anything else is an error wrapping ErrSpec.
func ParseSpec(s string) (o Options, ok bool, err error) {
	if b, err := strconv.ParseBool(strings.TrimSpace(s)); err == nil {
		return Options{}.withDefaults(), b, nil
	}
	f := strings.Fields(s)
	if len(f) != 4 {
		return Options{}, false, fmt.Errorf("%w: want FAMILY TABLE SET4 SET6, such as %q, or true", ErrSpec, "inet protect ban4 ban6")
	}
	o = Options{Family: f[0], Table: f[1], Set4: f[2], Set6: f[3]}
	if err := o.check(); err != nil {
		return Options{}, false, err
	}
	return o.withDefaults(), true, nil
}

// check refuses what no ruleset can hold.
func (o Options) check() error {
	switch o.Family {
	case "", "inet", "ip", "ip6", "bridge", "netdev":
	default:
		return fmt.Errorf("%w: family %q: want inet, ip, ip6, bridge or netdev", ErrSpec, o.Family)
	}
	if o.Table != "" && !validName(o.Table) {
		return fmt.Errorf("%w: table %q: want a letter, then letters, digits, '_', '.' or '-'", ErrSpec, o.Table)
	}
	for _, s := range []string{o.Set4, o.Set6} {
		if s != "" && s != NoSet && !validName(s) {
			return fmt.Errorf("%w: set %q: want a letter, then letters, digits, '_', '.' or '-', or - for none", ErrSpec, s)
		}
	}
	if o.Set4 == NoSet && o.Set6 == NoSet {
		return fmt.Errorf("%w: no set for either family", ErrSpec)
	}
	return nil
}

// validName reports whether s is an identifier that nft accepts
// unquoted; nft's names are at most 255 bytes.
func validName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '_' || c == '.' || c == '-')) {
			return false
		}
	}
	return true
}

// String is the specification that ParseSpec reads back.
func (o Options) String() string {
	o = o.withDefaults()
	return o.Family + " " + o.Table + " " + o.Set4 + " " + o.Set6
}
