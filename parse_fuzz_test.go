package protect

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"2d12h", "7d", "90s", "1d-1h", "99999999999999d", "d", "1.5h", "-3m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		// Whatever parses without days means what time.ParseDuration says.
		if !strings.Contains(s, "d") {
			if want, err := time.ParseDuration(s); err != nil || want != d {
				t.Fatalf("ParseDuration(%q) = %v, time.ParseDuration says %v, %v", s, d, want, err)
			}
		}
	})
}

// A consumer key is the identifier itself or a hash of it: never a
// transformed secret, and always a key ParseKey reads back.
func FuzzConsumerKey(f *testing.F) {
	for _, s := range []string{"cus_alpha", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "", "{slot}", "~" + strings.Repeat("a", 32), "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		k := ConsumerKey(id)
		switch {
		case k.Name == id:
			if !verbatimKey(id) {
				t.Fatalf("%q kept verbatim", id)
			}
		case len(k.Name) == 33 && k.Name[0] == '~':
			if _, err := hex.DecodeString(k.Name[1:]); err != nil {
				t.Fatalf("hash %q", k.Name)
			}
		default:
			t.Fatalf("ConsumerKey(%q) = %q", id, k.Name)
		}
		if strings.ContainsAny(k.Name, "{}") {
			t.Fatalf("%q would break the hash tag", k.Name)
		}
		if back, err := ParseKey(k.Name); err == nil && back != k {
			t.Fatalf("ParseKey(%q) = %+v", k.Name, back)
		}
	})
}

// ParseKey reads back what Key.String writes.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"203.0.113.7", "2001:db8:1:2::/64", "cus_alpha", "10.0.0.0/", "::ffff:1.2.3.4", "garbage"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			return
		}
		back, err := ParseKey(k.String())
		if err != nil || back != k {
			t.Fatalf("ParseKey(%q) = %+v, but ParseKey(%q) = %+v, %v", s, k, k.String(), back, err)
		}
	})
}

// A ban record from Redis is data that another process wrote: decoding
// it, as a key ban, a range ban or a take reply, must never panic; a
// decoded range ban has a valid range, and one bad record is skipped, not
// fatal.
func FuzzBanRecord(f *testing.F) {
	f.Add("198.51.100.0/24", "1732876400000|1732880000000|0|manual|ops|scanner")
	f.Add("2001:db8::/48", "1732876400000|0|0|manual||a|b|c")
	f.Add("198.51.100.0/24", "0|1|auto||a")
	f.Add("x", "|||||")
	f.Fuzz(func(t *testing.T, field, rec string) {
		b, err := decodeBan(Key{Name: "cus_alpha"}, false, rec)
		if err == nil && (b.Key != Key{Name: "cus_alpha"} || b.Range || !strings.HasSuffix(rec, b.Reason)) {
			t.Fatalf("decodeBan(%q) = %+v", rec, b)
		}
		skipped := 0
		_, bans, err := decodeRanges([]any{int64(1732876400000), field, rec}, func(string, error) { skipped++ })
		if err != nil || len(bans)+skipped != 1 {
			t.Fatalf("decodeRanges(%q, %q) = %+v, %v, %d skipped; want one ban or one skip", field, rec, bans, err, skipped)
		}
		if len(bans) == 1 && (!bans[0].Range || !bans[0].Key.Prefix.IsValid()) {
			t.Fatalf("decodeRanges(%q, %q) = %+v; want a range ban on a valid range", field, rec, bans[0])
		}
		r, err := decodeTake([]any{int64(3), int64(1000), int64(1), rec}, Key{Name: "cus_alpha"})
		if err == nil && (!r.Banned || !r.NewBan || r.Ban == nil || r.Count != 3) {
			t.Fatalf("decodeTake(%q) = %+v; want a new ban", rec, r)
		}
	})
}
