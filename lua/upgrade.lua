-- upgrade: rewrite one key ban stored by an earlier release (a hash of
-- created, expires, offense, reason, source, by) as a ban record string,
-- keeping its expiry. Anything else at the key is left as it is.
-- KEYS[1] the ban key. Returns the record, or false when there was no
-- earlier ban to upgrade.
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return false end
local f = redis.call('HMGET', KEYS[1], 'created', 'expires', 'offense', 'source', 'by', 'reason')
if not f[1] or not tonumber(f[1]) or not tonumber(f[2] or '') then return false end
local rec = f[1] .. '|' .. f[2] .. '|' .. (f[3] or '0') .. '|' .. (f[4] or '') .. '|' ..
  string.gsub(f[5] or '', '|', '/') .. '|' .. (f[6] or '')
local left = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
if left > 0 then
  redis.call('SET', KEYS[1], rec, 'PX', left)
elseif left == -1 then
  redis.call('SET', KEYS[1], rec)
end
return rec
