-- unban: lift one key ban, drop it from its index and journal the lift,
-- atomically.
-- KEYS[1] the ban record, <bns>{<key>}:b; KEYS[2] its index (see
-- take.lua). ARGV[1] the key, as the index holds it; ARGV[2] the
-- journal's bounds (see journal_opts in prelude.lua).
-- Returns {the record lifted, its ms left (-1: the key never expired)},
-- or false when there was none.
local now = now_ms()
local jl = journal_opts(ARGV[2])
-- A ban that ended is journaled over, not lifted.
sweep(KEYS[2], now, jl)
local rec = read_ban(KEYS[1])
local stream, recs = journal_keys(KEYS[2])
redis.call('ZREM', KEYS[2], ARGV[1])
own_type(recs, 'hash')
redis.call('HDEL', recs, ARGV[1])
if not rec then return false end
local left = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
journal(stream, jl, now, 'lift', ARGV[1], '0', rec)
return {rec, left}
