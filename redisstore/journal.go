package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/httpprotect/protect/store"
	"github.com/redis/go-redis/v9"
)

// The journal (store.Journal). Every script that writes, lifts or ends a
// ban appends its event to a Redis Stream in the same script, so that no
// change is without its event and a ban costs no round trip more: one
// XADD, trimmed by length (MAXLEN ~) and age (XTRIM MINID ~, from the
// script's own clock). A stream lives beside an index of key bans
// (index.go) and shares its hash tag: on a single node (and each shard
// of a Ring) one, <bns>events; on a Cluster one per slot,
// <bns>{<tag>}:events, since a script may write only keys of its slot.
// Range bans are journaled in the stream of the slot of <bns>ranges.
//
// Redis drops a key ban by its TTL without a word, so each index has a
// hash beside it, <bns>banrecs (<bns>{<tag>}:banrecs), of its bans'
// records; whoever next sweeps the index (a ban written to it, a lift, a
// listing, the first Take of the key after its ban) journals each ban
// whose end has passed as over, once, and drops its entry (sweep and
// noticed in lua/prelude.lua). A TakePlan notices none: the next of the
// others does.
//
// An entry holds kind (ban, lift, expire), key (the key or range, as
// store.Key writes it), range ("1" for a range ban), rec (the ban record,
// codec.go), time (ms, by Redis' clock) and prev, the ID of the entry
// before it in its stream, so that a reader can tell a cursor trimmed
// away (the first entry kept names a prev after it) from one at the edge.
//
// An entry's ID is "<µs>-<seq>", microseconds of Redis' clock (journal
// in lua/prelude.lua), and a cursor is that ID, on a Cluster
// "<µs>-<seq>.<slot>": Events merges the slots' streams in the order of
// (ID, slot), which is the order of Redis' clocks. A stream's next entry
// is never before the time of a read of it, so on a Cluster, whose
// masters are read one after another, each with its own clock, Events
// hands out only the entries before the earliest time any master was
// read at: an entry written on one master after it was read, while
// another was read, is then never behind a cursor handed out. An entry
// within a clock's skew of the present waits for a later read.

// Journal defaults (Options.JournalLength, Options.JournalAge).
const (
	defaultJournalLength = 1_000_000
	defaultJournalAge    = 7 * 24 * time.Hour
)

// maxEventsLimit bounds one page of Events, as a listing's page is
// bounded: a reader asks again for more.
const maxEventsLimit = 10_000

var _ store.Journal = (*redisSpace)(nil)

// streamKey is the journal's stream beside index.
func streamKey(index string) string { return strings.TrimSuffix(index, "bans") + "events" }

// rangeStreamKey is the stream where bns's range bans are journaled: the
// one of the slot of its ranges hash, so that the scripts that change a
// range ban may write it.
func (s *Store) rangeStreamKey(bns string) string {
	if !s.topo.isCluster() {
		return bns + "events"
	}
	return streamKey(slotIndexKey(bns, keySlot([]byte(rangesKey(bns)))))
}

// streamID is a stream entry's ID, µs-seq (ms names the first part, as
// Redis does).
type streamID struct{ ms, seq uint64 }

func (id streamID) String() string {
	return strconv.FormatUint(id.ms, 10) + "-" + strconv.FormatUint(id.seq, 10)
}

func (id streamID) compare(o streamID) int {
	return cmp.Or(cmp.Compare(id.ms, o.ms), cmp.Compare(id.seq, o.seq))
}

// next is the ID just after id, where a read after id starts.
func (id streamID) next() streamID {
	if id.seq == ^uint64(0) {
		return streamID{id.ms + 1, 0}
	}
	return streamID{id.ms, id.seq + 1}
}

// parseStreamID reads "ms-seq", digits only.
func parseStreamID(s string) (streamID, bool) {
	a, b, ok := strings.Cut(s, "-")
	ms, err1 := recordUint(a)
	seq, err2 := recordUint(b)
	return streamID{ms, seq}, ok && err1 == nil && err2 == nil
}

// recordUint reads decimal digits, nothing else.
func recordUint(s string) (uint64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errors.New("not decimal digits")
	}
	return strconv.ParseUint(s, 10, 64)
}

// journalPos is a place in the merged journal: an ID in the stream of a
// slot (0 off a Cluster).
type journalPos struct {
	id   streamID
	slot int
}

func (p journalPos) compare(o journalPos) int {
	return cmp.Or(p.id.compare(o.id), cmp.Compare(p.slot, o.slot))
}

// cursor writes p as Events hands it out.
func (p journalPos) cursor(cluster bool) string {
	if !cluster {
		return p.id.String()
	}
	return p.id.String() + "." + strconv.Itoa(p.slot)
}

// parseCursor reads a cursor as journalPos.cursor writes it.
func parseCursor(s string, cluster bool) (journalPos, error) {
	idText, slotText := s, "0"
	if cluster {
		var ok bool
		if idText, slotText, ok = strings.Cut(s, "."); !ok {
			return journalPos{}, fmt.Errorf("%w: cursor %q: want <ms>-<seq>.<slot>", store.ErrBadCursor, s)
		}
	}
	id, ok := parseStreamID(idText)
	slot, err := recordUint(slotText)
	// Only the cursor as written: "0-00" would read as "0-0", and two
	// texts of one place are one too many for a client that compares them.
	if !ok || err != nil || slot >= clusterSlots || strconv.FormatUint(slot, 10) != slotText || id.String() != idText {
		return journalPos{}, fmt.Errorf("%w: cursor %q: want <ms>-<seq>%s", store.ErrBadCursor, s, map[bool]string{true: ".<slot>"}[cluster])
	}
	return journalPos{id, int(slot)}, nil
}

// streamRead is what events.lua returned for one stream.
type streamRead struct {
	slot    int
	last    streamID // the newest entry ever written
	hasLast bool
	gone    streamID // the newest entry trimmed away
	hasGone bool
	entries []redis.XMessage
	full    bool // entries is as long as asked: the stream may hold more
}

// readTime is the earliest time of the reads of one call of Events (µs of
// Redis' clocks, 0 for none): every entry a stream gets after its read
// has an ID at or past it.
type readTime uint64

// add takes the time of one more read into t.
func (t *readTime) add(us uint64) {
	if *t == 0 || readTime(us) < *t {
		*t = readTime(us)
	}
}

// Events implements store.Journal: the events of the space's ban
// namespace, which every Space bound to it shares, oldest first, at most
// 10,000 a call whatever limit asks. On a
// Cluster it reads every slot's stream, with one script a master
// (eventsall.lua; one EVALSHA a slot before Redis 7), and a page holds up
// to limit events of each before they are merged. A ban over is
// journaled when the store notices it (journal.go), not by a read.
func (sp *redisSpace) Events(ctx context.Context, since string, limit int) ([]store.Event, error) {
	s := sp.s
	if _, ok := s.client.(*redis.Ring); ok {
		return nil, errors.New("protect: redis journal: not on a Ring: its shards' streams have no order between them")
	}
	cluster := s.topo.isCluster()
	var after journalPos
	if since != "" {
		p, err := parseCursor(since, cluster)
		if err != nil {
			return nil, err
		}
		after = p
	}
	if limit <= 0 {
		return nil, fmt.Errorf("protect: journal: limit %d, want at least 1", limit)
	}
	limit = min(limit, maxEventsLimit)
	slots := []int{0}
	if cluster {
		slots = make([]int, clusterSlots)
		for i := range slots {
			slots[i] = i
		}
	}
	for range 16 { // a page of damaged entries alone is read past
		var (
			reads []streamRead
			at    readTime
			err   error
		)
		if c, ok := s.client.(*redis.ClusterClient); ok {
			reads, at, err = sp.readMasters(ctx, c, since != "", after, limit)
			if isReply(err) && strings.Contains(err.Error(), "flag") { // before Redis 7: no shebang flags
				reads, at, err = sp.readStreams(ctx, slots, since != "", after, limit)
			}
		} else {
			reads, at, err = sp.readStreams(ctx, slots, since != "", after, limit)
		}
		if !cluster {
			at = 0 // one stream, read in one step: nothing written meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("protect: redis journal: %w", err)
		}
		if since != "" {
			if err := checkCursor(reads, after, since); err != nil {
				return nil, err
			}
		}
		evs, skipped, end := sp.merge(reads, at, after, limit, cluster)
		if len(evs) > 0 || !skipped {
			return evs, nil
		}
		after, since = end, end.cursor(cluster)
	}
	return nil, nil
}

// readMasters reads every slot's stream of a Cluster, as readStreams
// does, with one eventsall.lua a range of slots of a master: a Cluster's
// three masters cost three scripts rather than 16384.
func (sp *redisSpace) readMasters(ctx context.Context, c *redis.ClusterClient, started bool, after journalPos, limit int) ([]streamRead, readTime, error) {
	s := sp.s
	ranges, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, 0, err
	}
	from := func(next bool) string {
		if !started {
			return "-"
		}
		if next {
			return after.id.next().String()
		}
		return after.id.String()
	}
	keys, args := make([][]string, 0, len(ranges)), make([][]any, 0, len(ranges))
	for _, r := range ranges {
		if r.Start < 0 || r.End >= clusterSlots || r.Start > r.End {
			return nil, 0, fmt.Errorf("CLUSTER SLOTS: a range %d-%d", r.Start, r.End)
		}
		split := max(0, min(after.slot, r.End)-r.Start+1) // slots at or before the cursor's: past its ID
		if !started {
			split = 0
		}
		a := make([]any, 0, 6+r.End-r.Start+1)
		a = append(a, s.journal, limit, from(true), from(false), split, sp.bns.name)
		for _, tag := range slotTags()[r.Start : r.End+1] {
			a = append(a, tag)
		}
		keys, args = append(keys, []string{slotIndexKey(sp.bns.name, r.Start)}), append(args, a)
	}
	cmds, err := evalEach(ctx, c, eventsAllScript, keys, args)
	if err != nil {
		return nil, 0, err
	}
	var (
		reads []streamRead
		at    readTime
	)
	for i, cmd := range cmds {
		v, err := cmd.(*redis.Cmd).Slice()
		if err != nil {
			return nil, 0, err
		}
		us, err := toInt(first(v))
		if err != nil || us <= 0 {
			return nil, 0, fmt.Errorf("eventsall: unexpected reply")
		}
		at.add(uint64(us))
		for j := 1; j+1 < len(v); j += 2 {
			n, err := toInt(v[j])
			rv, ok := v[j+1].([]any)
			if err != nil || !ok || n < 1 || n > int64(ranges[i].End-ranges[i].Start+1) {
				return nil, 0, fmt.Errorf("eventsall: unexpected reply")
			}
			r, err := decodeStreamRead(rv, limit)
			if err != nil {
				return nil, 0, err
			}
			r.slot = ranges[i].Start + int(n) - 1
			reads = append(reads, r)
		}
	}
	return reads, at, nil
}

// first is v's first element, nil for none.
func first(v []any) any {
	if len(v) == 0 {
		return nil
	}
	return v[0]
}

// readStreams runs events.lua on the stream of each of slots, reading
// from after (past it when started) up to limit entries each.
func (sp *redisSpace) readStreams(ctx context.Context, slots []int, started bool, after journalPos, limit int) ([]streamRead, readTime, error) {
	s := sp.s
	keys := make([][]string, len(slots))
	args := make([][]any, len(slots))
	for i, slot := range slots {
		index := sp.bns.name + "bans"
		if s.topo.isCluster() {
			index = slotIndexKey(sp.bns.name, slot)
		}
		keys[i] = []string{index}
		from := "-"
		if started {
			id := after.id
			if slot <= after.slot { // (id, slot) itself was read
				id = id.next()
			}
			from = id.String()
		}
		args[i] = []any{s.journal, from, limit}
	}
	cmds, err := evalEach(ctx, s.client, eventsScript, keys, args)
	if err != nil {
		return nil, 0, err
	}
	reads := make([]streamRead, 0, len(slots))
	var at readTime
	for i, c := range cmds {
		v, err := c.(*redis.Cmd).Slice()
		if err != nil {
			return nil, 0, err
		}
		// events.lua adds the time of the read (µs) after what
		// read_stream returns.
		var us int64
		if len(v) == 4 {
			us, err = toInt(v[3])
		}
		if len(v) != 4 || err != nil || us <= 0 {
			return nil, 0, fmt.Errorf("%s: unexpected reply: %v, want a read and its time", streamKey(keys[i][0]), v)
		}
		r, err := decodeStreamRead(v[:3], limit)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", streamKey(keys[i][0]), err)
		}
		at.add(uint64(us))
		r.slot = slots[i]
		reads = append(reads, r)
	}
	return reads, at, nil
}

// decodeStreamRead reads read_stream's reply. Entries that are not what
// XRANGE returns are dropped here; those whose fields are damaged are
// contained when made into events (eventOf).
func decodeStreamRead(v []any, limit int) (r streamRead, err error) {
	if len(v) != 3 {
		return streamRead{}, fmt.Errorf("unexpected reply: %d elements, want 3", len(v))
	}
	r.last, r.hasLast = parseStreamID(str(v[0]))
	r.gone, r.hasGone = parseStreamID(str(v[1]))
	raw, _ := v[2].([]any)
	r.full = len(raw) >= limit
	for _, e := range raw {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			continue
		}
		id, _ := pair[0].(string)
		fields, _ := pair[1].([]any)
		m := make(map[string]any, len(fields)/2)
		for i := 0; i+1 < len(fields); i += 2 {
			if name, ok := fields[i].(string); ok {
				m[name] = fields[i+1]
			}
		}
		r.entries = append(r.entries, redis.XMessage{ID: id, Values: m})
	}
	return r, nil
}

// checkCursor refuses a cursor past the newest event of every stream
// (ErrBadCursor), and one older than an event trimmed away from any
// (ErrCursorGone).
func checkCursor(reads []streamRead, after journalPos, since string) error {
	newest, found := journalPos{}, false
	for _, r := range reads {
		if r.hasLast && (!found || newest.compare(journalPos{r.last, r.slot}) < 0) {
			newest, found = journalPos{r.last, r.slot}, true
		}
	}
	if !found || after.compare(newest) > 0 {
		return fmt.Errorf("%w: cursor %q is past the newest event", store.ErrBadCursor, since)
	}
	for _, r := range reads {
		if r.hasGone && after.compare(journalPos{r.gone, r.slot}) < 0 {
			return fmt.Errorf("%w: cursor %q: events after it were trimmed away", store.ErrCursorGone, since)
		}
	}
	return nil
}

// merge orders the entries read from every stream after after by (ID,
// slot), up to where every stream read in full is known to have no
// entry missing and, when at is not 0, before at (see readTime), and
// returns the first limit as events. skipped reports that damaged
// entries were left out, end the place of the last entry looked at.
func (sp *redisSpace) merge(reads []streamRead, at readTime, after journalPos, limit int, cluster bool) (evs []store.Event, skipped bool, end journalPos) {
	type entry struct {
		pos journalPos
		msg *redis.XMessage
	}
	var (
		all     []entry
		horizon journalPos
		bounded bool
	)
	for ri := range reads {
		r := &reads[ri]
		for i := range r.entries {
			id, ok := parseStreamID(r.entries[i].ID)
			if !ok {
				continue
			}
			all = append(all, entry{journalPos{id, r.slot}, &r.entries[i]})
		}
		if r.full && len(r.entries) > 0 {
			// Entries of this stream after its last read are not here:
			// nothing past it may be handed out yet.
			last, ok := parseStreamID(r.entries[len(r.entries)-1].ID)
			if p := (journalPos{last, r.slot}); ok && (!bounded || p.compare(horizon) < 0) {
				horizon, bounded = p, true
			}
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return a.pos.compare(b.pos) })
	for _, e := range all {
		if len(evs) == limit || bounded && e.pos.compare(horizon) > 0 || at != 0 && e.pos.id.ms >= uint64(at) {
			break
		}
		end = e.pos
		ev, ok := sp.eventOf(e.msg, e.pos, cluster)
		if !ok {
			skipped = true
			continue
		}
		evs = append(evs, ev)
	}
	return evs, skipped, end
}

// eventOf makes one stream entry an event. A record that does not decode
// is an event whose Ban is Malformed, as a listing shows a damaged ban;
// an entry without a kind or a key it can read is no event at all, and
// is logged once and skipped.
func (sp *redisSpace) eventOf(m *redis.XMessage, pos journalPos, cluster bool) (store.Event, bool) {
	field := func(name string) string { v, _ := m.Values[name].(string); return v }
	kind, ok := store.ParseEventKind(field("kind"))

	k, err := store.ParseKey(field("key"))
	if !ok || err != nil {
		sp.s.damage.logOnce(sp.bns.name+"events", m.ID, "protect: skipping a journal entry that is no event",
			"entry", m.ID, "kind", store.QuoteMalformed(field("kind")), "key", store.QuoteMalformed(field("key")))
		return store.Event{}, false
	}
	isRange := field("range") == "1"
	ms := pos.id.ms / 1000 // an ID counts microseconds
	if t, err := recordUint(field("time")); err == nil && t <= maxRecordMillis {
		ms = t
	}
	ms = min(ms, maxRecordMillis)
	b, err := decodeBan(k, isRange, field("rec"))
	if err != nil {
		b = malformedBan(k, isRange, field("rec"), err)
	}
	if kind == store.EventAllow || kind == store.EventDisallow || kind == store.EventAllowExpire {
		b.Source = "" // an allowlist entry has none (allows.lua)
	}
	return store.Event{Cursor: pos.cursor(cluster), Kind: kind, Time: time.UnixMilli(int64(ms)).UTC(), Ban: b}, true
}

// evalEach runs script once for each of keys, with args of the same
// index, in one pipeline on c, by its hash; when a node does not hold the
// script, it is loaded (on every master of a Cluster) and the pipeline
// sent again.
func evalEach(ctx context.Context, c redis.Cmdable, script *redis.Script, keys [][]string, args [][]any) ([]redis.Cmder, error) {
	run := func() ([]redis.Cmder, error) {
		return c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range keys {
				script.EvalSha(ctx, p, keys[i], args[i]...)
			}
			return nil
		})
	}
	cmds, err := run()
	if slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return isNoScript(c.Err()) }) {
		if err := script.Load(ctx, c).Err(); err != nil {
			return nil, err
		}
		cmds, err = run()
	}
	var reply redis.Error // a server's answer to one of them: the caller reads each
	if err != nil && !errors.As(err, &reply) {
		return nil, err
	}
	return cmds, nil
}
