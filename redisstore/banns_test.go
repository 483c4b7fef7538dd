package redisstore

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/store"

	"github.com/redis/go-redis/v9"
)

// Where a space with its own BanNamespace writes on Redis: its counter
// under Namespace, the ban and offense history under BanNamespace, range
// bans in the ban namespace's hash; and on a cluster the counter and the
// ban of one client share a slot.
func TestRedisBanNamespaceKeys(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			ctx := t.Context()
			c := dial(target.Addr(t))
			t.Cleanup(func() { c.Close() })
			root := uniqueNamespace(t, c)
			s := New(c, Options{RangeRefresh: -1, Logger: discardLogger()})
			t.Cleanup(func() { s.Close() })
			lim := store.Limits{TTL: time.Minute, BanLimit: 2, BanDuration: time.Hour, BanFactor: 2, MaxBanDuration: 24 * time.Hour, OffenseWindow: 24 * time.Hour}
			sp, err := s.Space(store.Scope{Namespace: root + "api:", BanNamespace: root, Limits: lim})
			if err != nil {
				t.Fatal(err)
			}
			a := netip.MustParseAddr("192.0.2.1")
			k := protect.Key{Prefix: netip.PrefixFrom(a, 32)}
			for range 2 {
				if _, err := sp.Take(ctx, k, a, 1); err != nil {
					t.Fatal(err)
				}
			}
			counter := root + "api:{192.0.2.1}:c"
			if n, _ := c.Get(ctx, counter).Int(); n != 2 {
				t.Fatalf("GET %s = %d, want 2", counter, n)
			}
			if r, err := sp.Take(ctx, k, a, 1); err != nil || !r.NewBan {
				t.Fatalf("Take #3 = %+v, %v; want a new ban", r, err)
			}
			if _, err := sp.AddBan(ctx, protect.Ban{Key: protect.Key{Prefix: netip.MustParsePrefix("198.51.100.0/24")}, Range: true, Source: protect.SourceManual}, time.Hour); err != nil {
				t.Fatal(err)
			}
			got, err := allKeys(ctx, c, root+"*")
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			idx := s.indexKey(root, k)
			want := []string{root + "ranges", root + "{192.0.2.1}:b", root + "{192.0.2.1}:o", idx,
				streamKey(idx), strings.TrimSuffix(idx, "bans") + "banrecs", s.rangeStreamKey(root)}
			slices.Sort(want)
			want = slices.Compact(want) // off a Cluster, the range ban's stream is the key ban's
			if !slices.Equal(got, want) {
				t.Fatalf("keys = %q, want %q (the counter deleted by the ban, the ban, offenses, ban index, its records and the journal under the ban namespace)", got, want)
			}
			if cc, ok := c.(*redis.ClusterClient); ok {
				slots := map[int64]bool{}
				for _, key := range []string{counter, root + "{192.0.2.1}:b", root + "{192.0.2.1}:o", s.indexKey(root, k)} {
					slots[cc.ClusterKeySlot(ctx, key).Val()] = true
				}
				if len(slots) != 1 {
					t.Fatalf("a client's counter, ban, offenses and ban index sit in %d slots, want 1", len(slots))
				}
			}

			if _, err := s.Space(store.Scope{Namespace: root, BanNamespace: "x{y}:", Limits: lim}); err == nil {
				t.Fatal("Space with a brace in BanNamespace accepted")
			}
		})
	}
}
