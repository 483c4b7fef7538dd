-- sweep: journal the end of the bans of one index of key bans that Redis
-- dropped by their TTL, drop their entries (see sweep in prelude.lua),
-- and count what is left; a listing runs it on every index it reads, in
-- place of a ZCARD.
-- KEYS[1] the index. ARGV[1] the journal's bounds (see journal_opts).
-- Returns the entries left in the index.
local n = redis.call('ZCARD', KEYS[1])
if n == 0 then return 0 end -- most of a Cluster's indexes: one call
sweep(KEYS[1], now_ms(), journal_opts(ARGV[1]))
return redis.call('ZCARD', KEYS[1])
