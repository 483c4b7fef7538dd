-- ranges: the namespace's range bans, as one hash of range → record.
-- KEYS[1] the ranges hash.
-- ARGV[1] 'list', or 'add' with ARGV[2] range, ARGV[3] length ms
-- (0: permanent), ARGV[4] source, ARGV[5] by, ARGV[6] reason; or 'get'
-- or 'lift' with ARGV[2] range.
-- A record is "expires|created|source|by|reason" in ms by Redis' clock.
-- A hash field cannot expire by itself, so every call drops the expired
-- ones. Returns {now ms, range, record, range, record, ...}; for 'add',
-- 'get' and 'lift' only the range concerned.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {now}
if ARGV[1] == 'add' then
  local len = tonumber(ARGV[3])
  local expires = 0
  if len > 0 then expires = now + len end
  local rec = expires .. '|' .. now .. '|' .. ARGV[4] .. '|' .. ARGV[5] .. '|' .. ARGV[6]
  redis.call('HSET', KEYS[1], ARGV[2], rec)
  out[2], out[3] = ARGV[2], rec
  return out
end
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local expires = tonumber(string.match(all[i + 1], '^(%d+)|'))
  if expires ~= nil and expires ~= 0 and expires <= now then
    redis.call('HDEL', KEYS[1], all[i])
  elseif ARGV[1] == 'list' or all[i] == ARGV[2] then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
if ARGV[1] == 'lift' then redis.call('HDEL', KEYS[1], ARGV[2]) end
return out
