-- index: add key bans written before the index existed to it, once.
-- KEYS[1] the index (see take.lua); KEYS[2...] ban records,
-- <bns>{<key>}:b, all of the index's slot.
-- Each record that holds a ban is added, scored by its expiry (+inf:
-- permanent); a key that is gone is skipped. Returns {how many were
-- added, then each key that holds no string}: an earlier release's hash,
-- for the caller to upgrade (lua/upgrade.lua) and index again.
local n = 0
local out = {0}
for i = 2, #KEYS do
  local ok, rec = pcall(redis.call, 'GET', KEYS[i])
  if not ok then
    out[#out + 1] = KEYS[i]
  elseif rec then
    local expires = string.match(rec, '^%d+|(%d+)|%d+|')
    if expires then
      if expires == '0' then expires = '+inf' end
      redis.call('ZADD', KEYS[1], expires, string.match(KEYS[i], '{([^}]*)}:b$'))
      n = n + 1
    end
  end
end
out[1] = n
return out
