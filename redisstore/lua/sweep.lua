-- sweep: journal the end of the bans of one index of key bans that Redis
-- dropped by their TTL, and drop their entries (see sweep in prelude.lua);
-- a listing runs it on every index it reads.
-- KEYS[1] the index. ARGV[1] the journal's bounds (see journal_opts).
-- Returns nothing.
sweep(KEYS[1], now_ms(), journal_opts(ARGV[1]))
return false
