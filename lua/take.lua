-- take: ban check, count and threshold ban for one key, atomically.
-- KEYS[1] counter, KEYS[2] ban record, KEYS[3] offense history
--   (all three share a hash tag, so they sit in one cluster slot).
-- ARGV[1] ttl ms, ARGV[2] ban limit (negative: never), ARGV[3] first ban ms,
-- ARGV[4] ban factor, ARGV[5] max ban ms, ARGV[6] offense window ms.
-- The key's text is read from the hash tag of KEYS[1] when a ban is written.
-- Returns {count} when not banned, else
-- {count, 1, new, ms left (0: permanent), created ms, expires ms, offense,
--  reason, source, by, range}.
-- Every time is Redis' own clock: instances' clocks never matter.
local ban = redis.call('HMGET', KEYS[2], 'created', 'expires', 'offense', 'reason', 'source', 'by')
if ban[1] then
  local left = redis.call('PTTL', KEYS[2])
  if left < 0 then left = 0 end
  return {0, 1, 0, left, ban[1], ban[2], ban[3], ban[4], ban[5], ban[6] or '', '0'}
end
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local limit = tonumber(ARGV[2])
if limit < 0 or n <= limit then
  return {n}
end
-- Past the ban limit: forget the stream, so that a lifted client starts
-- from nothing, and write an escalating ban.
redis.call('DEL', KEYS[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - window)
local offense = redis.call('ZCARD', KEYS[3]) + 1
redis.call('ZADD', KEYS[3], now, now .. ':' .. offense)
redis.call('PEXPIRE', KEYS[3], window)
local len = tonumber(ARGV[3]) * math.pow(tonumber(ARGV[4]), offense - 1)
local cap = tonumber(ARGV[5])
if len > cap then len = cap end
len = math.floor(len)
if len < 1 then len = 1 end
local reason = 'stream passed the ban limit of ' .. ARGV[2] .. ' requests'
local key = string.match(KEYS[1], '{(.*)}:c$')
redis.call('HSET', KEYS[2], 'key', key, 'reason', reason, 'source', 'auto', 'by', '',
  'created', now, 'expires', now + len, 'offense', offense)
redis.call('PEXPIRE', KEYS[2], len)
return {n, 1, 1, len, now, now + len, offense, reason, 'auto', '', '0'}
