-- allows: the ban namespace's allowlist, one hash of entry → record, a
-- record as a ban's (ban_record), whose source is 'manual'. A field is
-- 'key:' or 'range:' followed by the prefix.
-- KEYS[1] the allows hash.
-- ARGV[1] 'list'; 'put' with ARGV[2] the field, ARGV[3] the length ms (0:
-- until removed), ARGV[4] by and ARGV[5] the reason; or 'remove' with
-- ARGV[2] the prefix (both of its fields).
-- A hash field cannot expire by itself, so every call but 'put' drops the
-- entries over; one that does not parse is kept. Returns {now ms, field, record,
-- ...}: every entry for 'list', the one written for 'put', those removed
-- for 'remove'.
local now = now_ms()
local out = {now}
if ARGV[1] == 'put' then
  local len = tonumber(ARGV[3])
  local expires = 0
  if len > 0 then expires = now + len end
  local rec = ban_record(now, expires, 0, 'manual', ARGV[4], ARGV[5])
  local other = 'range:' .. string.sub(ARGV[2], 5)
  if string.sub(ARGV[2], 1, 6) == 'range:' then other = 'key:' .. string.sub(ARGV[2], 7) end
  redis.call('HDEL', KEYS[1], other)
  redis.call('HSET', KEYS[1], ARGV[2], rec)
  return {now, ARGV[2], rec}
end
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local expires = ban_expires(all[i + 1])
  if expires ~= nil and expires ~= 0 and expires <= now then
    redis.call('HDEL', KEYS[1], all[i])
  elseif ARGV[1] == 'list' or all[i] == 'key:' .. ARGV[2] or all[i] == 'range:' .. ARGV[2] then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
    if ARGV[1] == 'remove' then redis.call('HDEL', KEYS[1], all[i]) end
  end
end
return out
