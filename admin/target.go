package admin

import (
	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/internal/clientaddr"
)

// target parses s as the protector counts: an address becomes its
// counting key under the protector's IPv4Prefix and IPv6Prefix.
func (a *Admin) target(s string) (clientaddr.Target, error) {
	c := a.p.Config()
	return clientaddr.ParseTarget(s, clientaddr.Aggregator{V4Bits: c.IPv4Prefix, V6Bits: c.IPv6Prefix})
}

// Target returns the key a target names, aggregated as Verify counts: an
// address becomes its counting key ("2001:db8:1:2::99" →
// "2001:db8:1:2::/64"); a CIDR is a range, or a counting key when it is
// exactly one; "consumer:NAME" is the consumer key Verify uses for NAME
// (or NAME itself when it is already a consumer key that is not
// verbatim, as listings show it). Anything else is an error wrapping
// protect.ErrBadTarget: a typo must not ban or lift something nobody
// meant. isRange reports a range ban target.
func (a *Admin) Target(s string) (k protect.Key, isRange bool, err error) {
	t, err := a.target(s)
	return t.Key, t.IsRange, err
}

// CheckTarget returns the error Ban and Lift would return for target
// before they reach the store: one wrapping protect.ErrBadTarget when it
// names nothing, or protect.ErrWideTarget when it is too wide and wide is
// false. It lets a caller refuse a list of targets before banning any of
// them.
func (a *Admin) CheckTarget(s string, wide bool) error {
	t, err := a.target(s)
	if err != nil || wide {
		return err
	}
	return clientaddr.CheckWidth(s, t.CIDR, "force it if you mean it (protectctl -force; BanOptions.Force, LiftWide), or lift every ban with lift -all")
}

// CheckBanTarget returns the error an operator's ban on target meets
// before it reaches the store: CheckTarget's (force lets a wide CIDR
// pass), or one wrapping protect.ErrBadTarget when what the ban would
// cover (an address's counted group, or the range) holds a loopback
// address (127.0.0.0/8, ::1), whatever force says. Every ban the Admin is
// asked for must pass it.
func (a *Admin) CheckBanTarget(s string, force bool) error {
	if err := a.CheckTarget(s, force); err != nil {
		return err
	}
	t, _ := a.target(s)
	return clientaddr.CheckLoopback(s, t)
}
