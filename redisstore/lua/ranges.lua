-- ranges: read or lift the namespace's range bans, one hash of
-- range → ban record (ban.lua writes them).
-- KEYS[1] the ranges hash.
-- ARGV[1] 'list'; or 'get' or 'lift' with ARGV[2] the range.
-- A hash field cannot expire by itself, so every call drops the expired
-- ones; a record that does not parse is kept, never dropped: nothing
-- removes a ban silently. Returns {now ms, range, record, range, record,
-- ...}; for 'get' and 'lift' only the range concerned.
local now = now_ms()
local out = {now}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local expires = ban_expires(all[i + 1])
  if expires ~= nil and expires ~= 0 and expires <= now then
    redis.call('HDEL', KEYS[1], all[i])
  elseif ARGV[1] == 'list' or all[i] == ARGV[2] then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
if ARGV[1] == 'lift' then redis.call('HDEL', KEYS[1], ARGV[2]) end
return out
