package redisstore

import (
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/logtest"
	"github.com/httpprotect/protect/store"
)

const damageMsg = "protect: malformed record in the store, decided as if it were absent; lift it (protectctl lift) or repair it"

// damagedShapes are ban records no store writes, at a key ban's place:
// each with the TTL its key gets (0: none).
var damagedShapes = []struct {
	name, rec string
	ttl       time.Duration
	want      string // in Ban.Malformed
}{
	{"garbage", "garbage", 0, "1 fields"},
	{"offense x, no TTL", "1|2|x|auto||r", 0, `offense "x"`},
	{"temporary, no TTL", "1|2|0|auto||r", 0, "never expires"},
	{"source unknown", "1|2|0|nobody||r", time.Hour, `source "nobody"`},
	{"signed time", "+1|2|0|auto||r", time.Hour, `created "+1"`},
	{"expires before created", "5|2|0|auto||r", time.Hour, "before created"},
	{"time out of range", "1|99999999999999999999|0|auto||r", time.Hour, "out of range"},
	{"large", strings.Repeat("x", 200_000), 0, "(200000 bytes)"},
}

// A damaged ban record is damage to one client's record, not a store
// failure: under FailClosed, where an open circuit would answer 503, the
// circuit never opens; the damaged client is counted in Redis as if its
// record were absent; another client's 300 requests are counted exactly;
// the record is logged once, with its key, and every request that met it
// is counted in Stats.Malformed. The first request costs three round
// trips (it indexes the record and asks again, ignoring it), every later
// one one.
func TestRedisDamagedBanRecord(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			for _, shape := range damagedShapes {
				t.Run(shape.name, func(t *testing.T) {
					ns := testNamespace(t, addr)
					logs := &logtest.Recorder{}
					// A StoreTimeout no load reaches, and no refresher sharing the
					// client: the test counts round trips and failures.
					in := newInstance(t, addr, ns, protect.Config{OnStoreError: protect.FailClosed, StoreTimeout: 10 * time.Second, Logger: slog.New(logs)}, Options{RangeRefresh: -1})
					c := in.store.client
					ctx := t.Context()
					bad := ns + "{198.18.7.21}:b"
					victim, other := netip.MustParseAddr("198.18.7.21"), netip.MustParseAddr("198.18.7.22")
					// Loads the range bans, and the script on the victim's
					// node (a cluster loads it per node).
					in.p.VerifyAddr(ctx, victim)
					if err := c.Set(ctx, bad, shape.rec, shape.ttl).Err(); err != nil {
						t.Fatal(err)
					}
					in.hook.Take()
					for i := 1; i <= 50; i++ {
						d, err := in.p.VerifyAddr(ctx, victim)
						if err != nil || d.Status != protect.Allowed || d.Count != int64(i+1) || d.Err != nil {
							t.Fatalf("VerifyAddr(victim) #%d = %v (count %d, Err %v), %v; want Allowed, count %d", i, d.Status, d.Count, d.Err, err, i+1)
						}
						if trips, _ := in.hook.Take(); trips != map[bool]int64{true: 3, false: 1}[i == 1] {
							t.Fatalf("VerifyAddr(victim) #%d: %d round trips, want %d", i, trips, map[bool]int64{true: 3, false: 1}[i == 1])
						}
					}
					got := tally{}
					for range 300 {
						d, err := in.p.VerifyAddr(ctx, other)
						if err != nil {
							t.Fatal(err)
						}
						got[d.Status]++
					}
					if got[protect.Allowed] != 200 || got[protect.Limited] != 100 {
						t.Fatalf("300 requests of another client: %v, want 200 allowed, 100 limited", got)
					}
					for k, want := range map[string]string{ns + "{198.18.7.22}:c": "300", ns + "{198.18.7.21}:c": "51", bad: shape.rec} {
						if v, err := c.Get(ctx, k).Result(); v != want || err != nil {
							t.Fatalf("GET %s = %.40q, %v; want %.40q", k, v, err, want)
						}
					}
					st := in.p.Stats()
					if st.CircuitOpens != 0 || st.StoreErrors != 0 || st.StoreFailures != 0 || st.Malformed != 50 {
						t.Fatalf("Stats: circuit opens %d, store errors %d, failures %d, malformed %d; want 0, 0, 0, 50",
							st.CircuitOpens, st.StoreErrors, st.StoreFailures, st.Malformed)
					}
					var lines []map[string]string
					for _, r := range logs.Records() {
						if r["msg"] == damageMsg {
							lines = append(lines, r)
						}
					}
					if len(lines) != 1 || lines[0]["key"] != bad || lines[0]["client"] != "198.18.7.21" || !strings.Contains(lines[0]["error"], shape.want) {
						t.Fatalf("log lines %q: %v; want one, key %s, client 198.18.7.21, error saying %s", damageMsg, lines, bad, shape.want)
					}
					if len(lines[0]["error"]) > 2*store.MaxMalformedText+200 {
						t.Fatalf("log line of %d bytes: the record is quoted whole", len(lines[0]["error"]))
					}
				})
			}
		})
	}
}

// An operator finds a damaged record in the listing, inspects it and
// lifts it: Bans and Inspect report it as malformed (it refuses nothing),
// Lift deletes it and reports it lifted, and the client is then counted
// from where it stood, with nothing remembered of the damage.
func TestRedisDamagedBanAdministered(t *testing.T) {
	for _, target := range redisTargets {
		t.Run(target.Name, func(t *testing.T) {
			addr := target.Addr(t)
			for _, shape := range damagedShapes {
				t.Run(shape.name, func(t *testing.T) {
					ns := testNamespace(t, addr)
					in := newInstance(t, addr, ns, protect.Config{StoreTimeout: 10 * time.Second}, Options{RangeRefresh: -1})
					c := in.store.client
					ctx := t.Context()
					bad := ns + "{198.18.7.21}:b"
					c.Set(ctx, bad, shape.rec, shape.ttl) // in no index: the first request that meets it indexes it
					if _, err := in.p.Ban(ctx, "198.18.7.30", protect.BanOptions{Reason: "a real one"}); err != nil {
						t.Fatal(err)
					}
					if d, _ := in.p.VerifyAddr(ctx, netip.MustParseAddr("198.18.7.21")); d.Status != protect.Allowed {
						t.Fatalf("VerifyAddr(victim) = %v, want Allowed", d.Status)
					}
					bans, err := admin.New(in.p).Bans(ctx, admin.Filter{})
					if err != nil || len(bans) != 2 {
						t.Fatalf("Bans = %+v, %v; want the real ban and the damaged one", bans, err)
					}
					var dmg protect.Ban
					for _, b := range bans {
						if b.Key.String() == "198.18.7.21" {
							dmg = b
						}
					}
					if !strings.Contains(dmg.Malformed, shape.want) || dmg.Source != "" || dmg.Reason != "" {
						t.Fatalf("Bans: the damaged record is %+v; want Malformed saying %s", dmg, shape.want)
					}
					k := countedKey("198.18.7.21")
					st, err := admin.New(in.p).InspectKey(ctx, k)
					if err != nil || st.Ban == nil || !strings.Contains(st.Ban.Malformed, shape.want) || st.Count != 1 {
						t.Fatalf("Inspect = %+v, %v; want count 1 and the ban malformed, saying %s", st, err, shape.want)
					}
					lifted, err := in.p.Lift(ctx, "198.18.7.21", "test")
					if err != nil || len(lifted) != 1 || lifted[0].Malformed == "" {
						t.Fatalf("Lift = %+v, %v; want the damaged record, lifted", lifted, err)
					}
					if n, _ := c.Exists(ctx, bad).Result(); n != 0 {
						t.Fatalf("EXISTS %s = %d after the lift", bad, n)
					}
					in.hook.Take()
					d, err := in.p.VerifyAddr(ctx, netip.MustParseAddr("198.18.7.21"))
					if trips, _ := in.hook.Take(); err != nil || d.Status != protect.Allowed || d.Count != 2 || trips != 1 {
						t.Fatalf("VerifyAddr after the lift = %v, count %d, %d round trips, %v; want Allowed, 2, 1", d.Status, d.Count, trips, err)
					}
					if in.store.damage.n.Load() != 0 {
						t.Fatalf("the store still remembers %d damaged records", in.store.damage.n.Load())
					}
				})
			}
		})
	}
}

// A damaged range ban record refuses nothing and is listed, inspected
// and lifted as a key ban's is; the refresh that reads it logs it once.
func TestRedisDamagedRangeBan(t *testing.T) {
	addr := redisTargets[0].Addr(t)
	ns := testNamespace(t, addr)
	logs := &logtest.Recorder{}
	in := newInstance(t, addr, ns, protect.Config{}, Options{Logger: slog.New(logs)})
	ctx := t.Context()
	in.store.client.HSet(ctx, ns+"ranges", "198.18.0.0/16", "1|99999999999999|x|auto||r")
	for range 3 {
		if err := in.store.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if d, _ := in.p.VerifyAddr(ctx, netip.MustParseAddr("198.18.7.21")); d.Status != protect.Allowed {
		t.Fatalf("VerifyAddr inside the damaged range = %v, want Allowed", d.Status)
	}
	if n := logs.Count("protect: malformed range ban record, not enforced; lift it (protectctl lift) or repair it"); n != 1 {
		t.Fatalf("%d log lines for the damaged range, want 1", n)
	}
	bans, err := admin.New(in.p).Bans(ctx, admin.Filter{})
	if err != nil || len(bans) != 1 || !bans[0].Range || !strings.Contains(bans[0].Malformed, `offense "x"`) {
		t.Fatalf("Bans = %+v, %v; want the damaged range", bans, err)
	}
	lifted, err := in.p.Lift(ctx, "198.18.0.0/16", "test")
	if err != nil || len(lifted) != 1 || lifted[0].Malformed == "" {
		t.Fatalf("Lift = %+v, %v; want the damaged range, lifted", lifted, err)
	}
	if n, _ := in.store.client.HLen(ctx, ns+"ranges").Result(); n != 0 {
		t.Fatalf("HLEN ranges = %d after the lift", n)
	}
}

// The error a take returns beside its result is a MalformedError, which
// errors.Is finds as protect.ErrMalformed.
func TestRedisDamageError(t *testing.T) {
	addr := redisTargets[0].Addr(t)
	ns := testNamespace(t, addr)
	in := newInstance(t, addr, ns, protect.Config{}, Options{})
	in.store.client.Set(t.Context(), ns+"{cus_x}:b", "garbage", 0)
	sp, err := in.store.Space(store.Scope{Namespace: ns + "x:", BanNamespace: ns,
		Limits: store.Limits{MaxRequests: 10, TTL: time.Minute, BanLimit: 50, BanDuration: time.Hour, BanFactor: 2, MaxBanDuration: time.Hour, OffenseWindow: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sp.Take(t.Context(), protect.Key{Name: "cus_x"}, netip.Addr{}, 1)
	var me *store.MalformedError
	if !errors.Is(err, protect.ErrMalformed) || !errors.As(err, &me) || me.Key != ns+"{cus_x}:b" || me.Record != `"garbage"` || res.Count != 1 || res.Banned() {
		t.Fatalf("Take = %+v, %v; want count 1 and a MalformedError at %s{cus_x}:b", res, err, ns)
	}
}
