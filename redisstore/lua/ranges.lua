-- ranges: read or lift the namespace's range bans, one hash of
-- range → ban record (ban.lua writes them).
-- KEYS[1] the ranges hash, KEYS[2] the journal's stream of its slot.
-- ARGV[1] the journal's bounds (see journal_opts in prelude.lua); ARGV[2]
-- 'list'; or 'get' or 'lift' with ARGV[3] the range.
-- A hash field cannot expire by itself, so every call drops the expired
-- ones, and journals their end; a record that does not parse is kept,
-- never dropped: nothing removes a ban silently. Returns {now ms, range,
-- record, range, record, ...}; for 'get' and 'lift' only the range
-- concerned.
local now = now_ms()
local jl = journal_opts(ARGV[1])
local op, which = ARGV[2], ARGV[3]
local out = {now}
local all = redis.call('HGETALL', KEYS[1])
local lifted = nil
for i = 1, #all, 2 do
  local expires = ban_expires(all[i + 1])
  if expires ~= nil and expires ~= 0 and expires <= now then
    redis.call('HDEL', KEYS[1], all[i])
    journal(KEYS[2], jl, now, 'expire', all[i], '1', all[i + 1])
  elseif op == 'list' or all[i] == which then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
    if all[i] == which then lifted = all[i + 1] end
  end
end
if op == 'lift' and lifted then
  redis.call('HDEL', KEYS[1], which)
  journal(KEYS[2], jl, now, 'lift', which, '1', lifted)
end
return out
