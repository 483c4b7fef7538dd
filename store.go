package protect

import (
	"context"
	"net/netip"
	"time"
)

// A Store keeps stream counters, bans and offense histories. Protect ships
// two: MemoryStore (one process) and RedisStore (shared by every instance).
// Every method must be safe for concurrent use.
//
// Each method takes a namespace (Config.Namespace) that separates the data
// of protectors sharing one store.
//
// The contract that makes limits exact: Take performs steps 3–5 of the
// pipeline — ban check, count, threshold ban — as one atomic operation per
// key. There is no read-then-write across calls, so any number of
// concurrent Takes on one key, from any number of processes, see each count
// exactly once. A store shared over a network should make one round trip
// per Take.
//
// Expiry is measured by the store's own clock. Counters are forgotten after
// Limits.TTL without a Take; bans end at their expiry unless permanent.
type Store interface {
	// Take counts one request for k and decides it:
	//
	//   - k, or a range ban containing addr (when addr is valid), is banned:
	//     Result.Banned, nothing counted;
	//   - otherwise the counter goes up by one and its expiry is reset to
	//     lim.TTL; if the count is past lim.BanLimit (and BanLimit is not
	//     negative), the counter is deleted, an offense is recorded and a
	//     ban of BanLength(lim, offenses) is written: Result.NewBan.
	//
	// Comparing the count with MaxRequests is left to the caller.
	Take(ctx context.Context, ns string, k Key, addr netip.Addr, lim *Limits) (Result, error)

	// AddBan writes b, replacing any ban on the same key, and returns it
	// as stored: Created is set by the store's clock, and Expires from
	// length unless b is permanent (length 0). b.Range selects a range ban.
	AddBan(ctx context.Context, ns string, b Ban, length time.Duration) (Ban, error)

	// Lift removes the ban on exactly k, key or range, and reports the
	// ban it removed. Lifting a key that is not banned is not an error.
	Lift(ctx context.Context, ns string, k Key) (Ban, bool, error)

	// Bans lists every active ban, keys and ranges, in no given order.
	Bans(ctx context.Context, ns string) ([]Ban, error)

	// RangeBans lists the active range bans alone. It is cheap where Bans
	// is not: on Redis one read of one hash, not a SCAN of every key.
	RangeBans(ctx context.Context, ns string) ([]Ban, error)

	// Inspect reports the state of k without changing it.
	Inspect(ctx context.Context, ns string, k Key, lim *Limits) (KeyState, error)

	// Close releases the store's resources. A store passed in Config is
	// not closed by Protector.Close: whoever made it closes it.
	Close() error
}

// Limits are the numbers a Store needs to decide a Take. A Protector
// derives them from its Config; the zero value is not meaningful (a TTL of
// zero forgets every count at once).
type Limits struct {
	TTL            time.Duration // a counter is forgotten after TTL without requests
	BanLimit       int64         // the count past which a ban is written; negative: never
	BanDuration    time.Duration // the first ban's length
	BanFactor      float64       // each further ban within OffenseWindow is this much longer
	MaxBanDuration time.Duration // no automatic ban is longer
	OffenseWindow  time.Duration // how long a ban counts towards escalation
}

// Result is the outcome of Store.Take. The zero Result is a request that
// was not counted and not banned.
type Result struct {
	// Count is the stream's count including this request. It is zero when
	// a ban answered before counting.
	Count int64
	// Banned reports that the request is refused by a ban: Ban describes it.
	Banned bool
	// NewBan reports that this request crossed BanLimit and wrote Ban.
	NewBan bool
	// Cached reports that the answer came from a local cache without
	// asking the shared store.
	Cached bool
	// Ban is the ban that refused the request when Banned, else nil. It
	// may be shared: treat it as read-only.
	Ban *Ban
	// BanLeft is the time until the ban ends, by the store's clock; zero
	// for a permanent ban.
	BanLeft time.Duration
}

// KeyState is what Store.Inspect reports about one key. The zero value is
// a key with no counter, no ban and no offenses.
type KeyState struct {
	Key      Key
	Count    int64         // the current stream count; 0 when forgotten
	CountTTL time.Duration // time until the counter is forgotten without requests
	Ban      *Ban          // the active ban on the key itself, or nil
	Offenses int           // bans recorded within the offense window
}
