-- ban: write an operator's ban, replacing any ban on the same key or range,
-- and journal it.
-- A key ban: KEYS[1] counter (in the namespace), KEYS[2] ban record (in
-- the ban namespace); the counter is deleted, so that the key starts from
-- nothing once the ban is lifted.
-- KEYS[3] the index of key bans the ban is added to (see take.lua).
-- A range ban: KEYS[1] the ban namespace's ranges hash, KEYS[2] the
-- journal's stream of its slot; ARGV[6] the range.
-- ARGV[1] length ms (0: permanent), ARGV[2] source, ARGV[3] by (no '|'),
-- ARGV[4] reason, ARGV[5] 'key' or 'range', ARGV[7] the journal's bounds
-- (see journal_opts in prelude.lua).
-- Returns the ban record.
local now = now_ms()
local len = tonumber(ARGV[1])
local jl = journal_opts(ARGV[7])
local expires = 0
if len > 0 then expires = now + len end
local rec = ban_record(now, expires, 0, ARGV[2], ARGV[3], ARGV[4])
if ARGV[5] == 'range' then
  redis.call('HSET', KEYS[1], ARGV[6], rec)
  journal(KEYS[2], jl, now, 'ban', ARGV[6], '1', rec)
  return rec
end
redis.call('DEL', KEYS[1])
put_ban(KEYS[2], KEYS[3], ARGV[6], rec, now, len, jl)
return rec
