-- ban: write an operator's ban, replacing any ban on the same key or range.
-- A key ban: KEYS[1] counter (in the namespace), KEYS[2] ban record (in
-- the ban namespace); the counter is deleted, so that the key starts from
-- nothing once the ban is lifted.
-- KEYS[3] the index of key bans the ban is added to, scored by its expiry
-- (+inf: permanent); see take.lua.
-- A range ban: KEYS[1] the ban namespace's ranges hash; ARGV[6] the range.
-- ARGV[1] length ms (0: permanent), ARGV[2] source, ARGV[3] by (no '|'),
-- ARGV[4] reason, ARGV[5] 'key' or 'range'.
-- Returns the ban record, "created|expires|offense|source|by|reason".
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local len = tonumber(ARGV[1])
local expires = 0
if len > 0 then expires = now + len end
local rec = now .. '|' .. expires .. '|0|' .. ARGV[2] .. '|' .. ARGV[3] .. '|' .. ARGV[4]
if ARGV[5] == 'range' then
  redis.call('HSET', KEYS[1], ARGV[6], rec)
  return rec
end
redis.call('DEL', KEYS[1])
if len > 0 then
  redis.call('SET', KEYS[2], rec, 'PX', len)
  redis.call('ZADD', KEYS[3], expires, ARGV[6])
else
  redis.call('SET', KEYS[2], rec)
  redis.call('ZADD', KEYS[3], '+inf', ARGV[6])
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - 60000) -- as take.lua does
return rec
