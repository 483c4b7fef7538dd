package nftsink

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/testclock"
)

// ban is a ban on target (an address or CIDR) ending after left (0:
// permanent), by now.
func ban(now time.Time, target string, left time.Duration) protect.Ban {
	p, err := netip.ParsePrefix(target)
	if err != nil {
		a := netip.MustParseAddr(target)
		p = netip.PrefixFrom(a, a.BitLen())
	}
	b := protect.Ban{Key: protect.Key{Prefix: p}, Range: p.Bits() < p.Addr().BitLen(), Source: protect.SourceManual}
	if left != 0 {
		b.Expires = now.Add(left)
	}
	return b
}

// show writes elements as "first-last@left", left "perm" when permanent.
func show(els []Element, now time.Time) string {
	var s []string
	for _, e := range els {
		left := "perm"
		if !e.Expires.IsZero() {
			left = e.Expires.Sub(now).String()
		}
		s = append(s, fmt.Sprintf("%v-%v@%s", e.First, e.Last, left))
	}
	return strings.Join(s, " ")
}

func TestElements(t *testing.T) {
	now := testclock.New().Now()
	type b struct {
		target string
		left   time.Duration
	}
	tests := []struct {
		name   string
		bans   []b
		v4, v6 string
	}{
		{"one address", []b{{"203.0.113.7", time.Hour}}, "203.0.113.7-203.0.113.7@1h0m0s", ""},
		{"a range", []b{{"198.51.100.0/24", 0}}, "198.51.100.0-198.51.100.255@perm", ""},
		{"IPv6 counting prefix", []b{{"2001:db8:1:2::/64", time.Hour}}, "", "2001:db8:1:2::-2001:db8:1:2:ffff:ffff:ffff:ffff@1h0m0s"},
		{"key inside a longer range is left out",
			[]b{{"198.51.100.7", time.Hour}, {"198.51.100.0/24", 2 * time.Hour}},
			"198.51.100.0-198.51.100.255@2h0m0s", ""},
		{"key inside a permanent range is left out",
			[]b{{"198.51.100.7", time.Hour}, {"198.51.100.0/24", 0}},
			"198.51.100.0-198.51.100.255@perm", ""},
		{"key inside an equal range is left out",
			[]b{{"198.51.100.7", time.Hour}, {"198.51.100.0/24", time.Hour}},
			"198.51.100.0-198.51.100.255@1h0m0s", ""},
		{"key outliving its range cuts it",
			[]b{{"198.51.100.7", 3 * time.Hour}, {"198.51.100.0/24", time.Hour}},
			"198.51.100.0-198.51.100.6@1h0m0s 198.51.100.7-198.51.100.7@3h0m0s 198.51.100.8-198.51.100.255@1h0m0s", ""},
		{"permanent key in a timed range",
			[]b{{"198.51.100.0", 0}, {"198.51.100.255", 0}, {"198.51.100.0/24", time.Hour}},
			"198.51.100.0-198.51.100.0@perm 198.51.100.1-198.51.100.254@1h0m0s 198.51.100.255-198.51.100.255@perm", ""},
		{"three levels",
			[]b{{"10.0.0.0/8", time.Hour}, {"10.1.0.0/16", 2 * time.Hour}, {"10.1.2.3", 30 * time.Minute}, {"10.1.2.4", 3 * time.Hour}},
			"10.0.0.0-10.0.255.255@1h0m0s 10.1.0.0-10.1.2.3@2h0m0s 10.1.2.4-10.1.2.4@3h0m0s 10.1.2.5-10.1.255.255@2h0m0s 10.2.0.0-10.255.255.255@1h0m0s", ""},
		{"a range and a key ban on one prefix: the longer",
			[]b{{"198.51.100.0/24", time.Hour}, {"198.51.100.0/24", 2 * time.Hour}},
			"198.51.100.0-198.51.100.255@2h0m0s", ""},
		{"the end of the address space",
			[]b{{"255.255.255.0/24", time.Hour}, {"255.255.255.255", 0}},
			"255.255.255.0-255.255.255.254@1h0m0s 255.255.255.255-255.255.255.255@perm", ""},
		{"over bans are left out", []b{{"203.0.113.7", -time.Second}}, "", ""},
		{"disjoint, sorted",
			[]b{{"203.0.113.9", time.Hour}, {"192.0.2.1", time.Minute}, {"2001:db8::/64", 0}},
			"192.0.2.1-192.0.2.1@1m0s 203.0.113.9-203.0.113.9@1h0m0s", "2001:db8::-2001:db8::ffff:ffff:ffff:ffff@perm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bans []protect.Ban
			for _, x := range tt.bans {
				bans = append(bans, ban(now, x.target, x.left))
			}
			bans = append(bans, protect.Ban{Key: protect.ConsumerKey("cus_alpha"), Source: protect.SourceManual})
			v4, v6 := Elements(bans, now)
			if got := show(v4, now); got != tt.v4 {
				t.Errorf("Elements(%v) IPv4 = %q, want %q", tt.bans, got, tt.v4)
			}
			if got := show(v6, now); got != tt.v6 {
				t.Errorf("Elements(%v) IPv6 = %q, want %q", tt.bans, got, tt.v6)
			}
		})
	}
}

// FuzzElements checks, for any set of nested bans, that the elements do
// not overlap and that each address is held exactly as long as its
// longest ban.
func FuzzElements(f *testing.F) {
	f.Add([]byte{10, 0, 0, 0, 8, 1, 10, 1, 2, 3, 32, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		now := testclock.New().Now()
		var bans []protect.Ban
		for len(data) >= 6 && len(bans) < 20 {
			// Addresses in 10.0.0.0/24 and prefixes from /24, so that a
			// walk over the 256 addresses checks every one.
			a := netip.AddrFrom4([4]byte{10, 0, 0, data[3]})
			bits := 24 + int(data[4]%9)
			b := ban(now, netip.PrefixFrom(a, bits).Masked().String(), time.Duration(data[5]%4)*time.Hour)
			bans = append(bans, b)
			data = data[6:]
		}
		v4, _ := Elements(bans, now)
		for i := 1; i < len(v4); i++ {
			if !v4[i-1].Last.Less(v4[i].First) {
				t.Fatalf("elements %v and %v overlap or are out of order", v4[i-1], v4[i])
			}
		}
		for x := range 256 {
			a := netip.AddrFrom4([4]byte{10, 0, 0, byte(x)})
			var want time.Time
			banned := false
			for _, b := range bans {
				if b.Key.Prefix.Contains(a) {
					if !banned || outlives(b.Expires, want) {
						want = b.Expires
					}
					banned = true
				}
			}
			var got time.Time
			held := false
			for _, e := range v4 {
				if !a.Less(e.First) && !e.Last.Less(a) {
					got, held = e.Expires, true
				}
			}
			if held != banned || !got.Equal(want) {
				t.Fatalf("address %v: held %v until %v, want %v until %v", a, held, got, banned, want)
			}
		}
	})
}

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in   string
		want string // Options.String, or the error's text
		on   bool
	}{
		{"inet protect ban4 ban6", "inet protect ban4 ban6", true},
		{"  ip fw blocked -  ", "ip fw blocked -", true},
		{"true", "inet protect ban4 ban6", true},
		{"false", "inet protect ban4 ban6", false},
		{"inet protect ban4", `nftsink: bad set specification: want FAMILY TABLE SET4 SET6, such as "inet protect ban4 ban6", or true`, false},
		{"arp protect ban4 ban6", `nftsink: bad set specification: family "arp": want inet, ip, ip6, bridge or netdev`, false},
		{"inet 9t ban4 ban6", `nftsink: bad set specification: table "9t": want a letter, then letters, digits, '_', '.' or '-'`, false},
		{"inet protect ban;4 ban6", `nftsink: bad set specification: set "ban;4": want a letter, then letters, digits, '_', '.' or '-', or - for none`, false},
		{"inet protect - -", `nftsink: bad set specification: no set for either family`, false},
	}
	for _, tt := range tests {
		o, on, err := ParseSpec(tt.in)
		got := o.String()
		if err != nil {
			got = err.Error()
		}
		if got != tt.want || on != tt.on {
			t.Errorf("ParseSpec(%q) = %q, %v, want %q, %v", tt.in, got, on, tt.want, tt.on)
		}
	}
}

func FuzzParseSpec(f *testing.F) {
	f.Add("inet protect ban4 ban6")
	f.Add("ip6 t - s6")
	f.Fuzz(func(t *testing.T, s string) {
		o, on, err := ParseSpec(s)
		if err != nil || !on {
			return
		}
		back, on2, err := ParseSpec(o.String())
		if err != nil || !on2 || back.String() != o.String() {
			t.Fatalf("ParseSpec(%q).String() = %q does not read back: %v", s, o.String(), err)
		}
	})
}

// BenchmarkPoll measures what one poll costs in the process when
// nothing changed, on the memory store: listing the bans and cutting
// them into elements (the kernel is not asked).
func BenchmarkPoll(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("bans=%d", n), func(b *testing.B) {
			p, err := protect.New(protect.Config{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			ctx := context.Background()
			for i := range n {
				a := netip.AddrFrom4([4]byte{100, 64 + byte(i>>16), byte(i >> 8), byte(i)})
				if _, err := p.Ban(ctx, a.String(), protect.BanOptions{For: time.Hour}); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				bans, err := admin.New(p).Bans(ctx, admin.Filter{})
				if err != nil || len(bans) != n {
					b.Fatalf("Bans = %d, %v", len(bans), err)
				}
				Elements(bans, time.Now())
			}
		})
	}
}
