-- allows: the ban namespace's allowlist, one hash of entry → record, a
-- record as a ban's (ban_record), whose source is 'manual'. A field is
-- 'key:' or 'range:' followed by the prefix.
-- KEYS[1] the allows hash, KEYS[2] the journal's stream of its slot.
-- ARGV[1] the journal's bounds (journal_opts); ARGV[2] 'list'; 'put' with
-- ARGV[3] the field, ARGV[4] the length ms (0: until removed), ARGV[5] by
-- and ARGV[6] the reason; or 'remove' with ARGV[3] the prefix (both of
-- its fields). A put journals an allow, a remove a disallow.
-- A hash field cannot expire by itself, so every call but 'put' drops the
-- entries over, journaling each as 'allow-expire' (as the memory store
-- does when it sweeps or lists); one that does not parse is kept. Returns {now ms, field, record, ...}: every entry
-- for 'list', the one written for 'put', those removed for 'remove'.
local now = now_ms()
local jl = journal_opts(ARGV[1])
local out = {now}
-- entry_journal journals kind for the entry of field with record rec.
local function entry_journal(kind, field, rec)
  local is_range, prefix = '0', string.sub(field, 5)
  if string.sub(field, 1, 6) == 'range:' then is_range, prefix = '1', string.sub(field, 7) end
  journal(KEYS[2], jl, now, kind, prefix, is_range, rec)
end
if ARGV[2] == 'put' then
  local len = tonumber(ARGV[4])
  local expires = 0
  if len > 0 then expires = now + len end
  local rec = ban_record(now, expires, 0, 'manual', ARGV[5], ARGV[6])
  local other = 'range:' .. string.sub(ARGV[3], 5)
  if string.sub(ARGV[3], 1, 6) == 'range:' then other = 'key:' .. string.sub(ARGV[3], 7) end
  redis.call('HDEL', KEYS[1], other)
  redis.call('HSET', KEYS[1], ARGV[3], rec)
  entry_journal('allow', ARGV[3], rec)
  return {now, ARGV[3], rec}
end
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local expires = ban_expires(all[i + 1])
  if expires ~= nil and expires ~= 0 and expires <= now then
    redis.call('HDEL', KEYS[1], all[i])
    entry_journal('allow-expire', all[i], all[i + 1])
  elseif ARGV[2] == 'list' or all[i] == 'key:' .. ARGV[3] or all[i] == 'range:' .. ARGV[3] then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
    if ARGV[2] == 'remove' then
      redis.call('HDEL', KEYS[1], all[i])
      entry_journal('disallow', all[i], all[i + 1])
    end
  end
end
return out
