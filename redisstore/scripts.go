package redisstore

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts, each one EVALSHA of one request (EVAL only when the
// server answers NOSCRIPT). What several of them need (Redis' clock, the
// limits, the ban record, the escalating ban, the index of key bans) is
// written once, in lua/prelude.lua, and prepended to each script's text
// here: a script may call only what it carries, so the prelude travels
// with every script rather than in a second call. A Script is its
// source and hash, nothing more, so every Store shares these.
var (
	//go:embed lua/prelude.lua
	preludeLua string
	//go:embed lua/take.lua
	takeLua string
	//go:embed lua/plan.lua
	planLua string
	//go:embed lua/ban.lua
	banLua string
	//go:embed lua/unban.lua
	unbanLua string
	//go:embed lua/inspect.lua
	inspectLua string
	//go:embed lua/ranges.lua
	rangesLua string
	//go:embed lua/allows.lua
	allowsLua string
	//go:embed lua/sweep.lua
	sweepLua string
	//go:embed lua/events.lua
	eventsLua string
	//go:embed lua/eventsall.lua
	eventsAllLua string
	//go:embed lua/sweepall.lua
	sweepAllLua string

	takeScript    = newScript(takeLua)
	planScript    = newScript(planLua)
	banScript     = newScript(banLua)
	unbanScript   = newScript(unbanLua)
	inspectScript = newScript(inspectLua)
	rangesScript  = newScript(rangesLua)
	allowsScript  = newScript(allowsLua)
	sweepScript   = newScript(sweepLua)
	eventsScript  = newScript(eventsLua)
	// A shebang must open the script, before the prelude.
	eventsAllScript = redis.NewScript(crossSlot + preludeLua + eventsAllLua)
	sweepAllScript  = redis.NewScript(crossSlot + preludeLua + sweepAllLua)
)

// crossSlot opens a script that reads keys of several slots of one
// Cluster node.
const crossSlot = "#!lua flags=allow-cross-slot-keys\n"

func newScript(src string) *redis.Script { return redis.NewScript(preludeLua + src) }
