-- take: ban check, count and threshold ban for one key, atomically.
-- KEYS[1] the key's base, <ns>{<key>}: its counter is KEYS[1]..':c'.
-- KEYS[2] the key's ban base, <bns>{<key>} (absent: KEYS[1], when the
--   ban namespace is the namespace): its ban record is ..':b', its offense
--   history ..':o'. Bases share the key's hash tag, so every key sits in
--   the slot of KEYS[1] and the script is legal on Redis Cluster; declared
--   bases instead of three keys keep every request's command short.
-- KEYS[3] on Redis Cluster, the index of key bans of this slot,
--   <bns>{<slot tag>}:bans (absent: <bns>bans, one per ban namespace).
-- ARGV[1] n to count (0: decide only, write nothing).
-- ARGV[2] the limits (see limits in prelude.lua).
-- ARGV[3] optional: the SHA-1 of a damaged ban record to decide as if it
--   were absent (see damaged in prelude.lua).
-- Returns the count, an integer, when not banned ({count} when not banned
-- because ARGV[3] named the ban record there; {count, 'counter', what it
-- held} when the counter held no count, and was counted again from
-- nothing: see add_count); else {count, ms left (-1: the key never
-- expires), new (0 or 1), ban record}.
local bans = KEYS[2] or KEYS[1]
local counter, banKey = KEYS[1] .. ':c', bans .. ':b'
local rec = read_ban(banKey)
local ignored = false
if rec then
  if not damaged(rec, ARGV[3]) then
    return {0, ban_left(banKey), 0, rec}
  end
  ignored = true
end
if ARGV[1] == '0' then
  local count, was = read_count(counter)
  if ignored then return {count} end
  if was then return {count, 'counter', was} end
  return count
end
-- A count within the limit needs the first two of the limits alone: the
-- whole text is read only for a ban.
local ttl, limit = counting_limits(ARGV[2])
local count, was = add_count(counter, ARGV[1]) -- as text: no float on the way
redis.call('PEXPIRE', counter, ttl)
if count == tonumber(ARGV[1]) then noticed(bans, KEYS[3], ARGV[2]) end
if limit < 0 or count <= limit then
  if ignored then return {count} end
  if was then return {count, 'counter', was} end
  return count
end
local len
len, rec = escalate(counter, bans, KEYS[3], now_ms(), limits(ARGV[2]))
return {count, len, 1, rec}
