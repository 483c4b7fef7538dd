-- ban: write an operator's ban on one key, replacing any ban there.
-- KEYS[1] counter, KEYS[2] ban record.
-- ARGV[1] key text, ARGV[2] reason, ARGV[3] source, ARGV[4] by,
-- ARGV[5] length ms (0: permanent).
-- Returns {created ms, expires ms (0: permanent)}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local len = tonumber(ARGV[5])
local expires = 0
if len > 0 then expires = now + len end
redis.call('DEL', KEYS[2], KEYS[1])
redis.call('HSET', KEYS[2], 'key', ARGV[1], 'reason', ARGV[2], 'source', ARGV[3], 'by', ARGV[4],
  'created', now, 'expires', expires, 'offense', 0)
if len > 0 then redis.call('PEXPIRE', KEYS[2], len) end
return {now, expires}
