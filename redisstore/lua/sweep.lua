-- sweep: journal the end of the bans of one index of key bans that Redis
-- dropped by their TTL, drop their entries (see sweep in prelude.lua),
-- and count what is left; a listing runs it on every index it reads, in
-- place of counting them.
-- KEYS[1] the index. ARGV[1] the journal's bounds (see journal_opts).
-- Returns the entries left in the index.
return sweep_count(KEYS[1], now_ms(), journal_opts(ARGV[1]))
