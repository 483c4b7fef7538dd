-- ranges: read or lift the namespace's range bans, one hash of
-- range → ban record ("created|expires|offense|source|by|reason", in ms
-- by Redis' clock; ban.lua writes them).
-- KEYS[1] the ranges hash.
-- ARGV[1] 'list'; or 'get' or 'lift' with ARGV[2] the range.
-- A hash field cannot expire by itself, so every call drops the expired
-- ones. Returns {now ms, range, record, range, record, ...}; for 'get' and
-- 'lift' only the range concerned.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {now}
-- A record that does not parse is kept, never dropped: nothing removes a
-- ban silently.
local function expiry(rec)
  return tonumber(string.match(rec, '^%d+|(%d+)|'))
end
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local expires = expiry(all[i + 1])
  if expires ~= nil and expires ~= 0 and expires <= now then
    redis.call('HDEL', KEYS[1], all[i])
  elseif ARGV[1] == 'list' or all[i] == ARGV[2] then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
if ARGV[1] == 'lift' then redis.call('HDEL', KEYS[1], ARGV[2]) end
return out
